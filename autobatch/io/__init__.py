"""Model files: our format (autobatch_data, autobatch_save), DyNet's (dynet_text,
dynet_meta, dynet_pickle), the registry of savable classes, file access, and formats,
the one module that chooses between them for dy.save / dy.load. Files are data:
loading never imports or calls anything a file names. Imports api/ and errors only."""
