/* Prefetching the nodes a per-node loop will reach: a batch gathers its nodes from
   every instance, so they lie anywhere in the node array and each one read is a
   cache miss unless fetched ahead. Macros, not functions: GCC drops a call to a
   function that only prefetches (it has no side effects). */
#ifndef AB_PREFETCH_H
#define AB_PREFETCH_H

/* a Node is 96 bytes: two cache lines */
#define AB_PREFETCH_NODE(n) (__builtin_prefetch(n), __builtin_prefetch((const char*)(n) + 64))
/* argument a of node i of NodeView v (its own node fetched earlier) */
#define AB_PREFETCH_ARG(v, i, a) AB_PREFETCH_NODE(&(v)->nodes[(v)->args[(v)->nodes[i].args_at + (a)]])

#endif
