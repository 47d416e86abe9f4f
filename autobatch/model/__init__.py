"""The model: parameter collections and initializers, the trainers with their compiled
update rules, and the builders (recurrent, tree, softmax). Imports api/, io/ (a
collection saves and populates itself; builders register as savable) and settings."""
