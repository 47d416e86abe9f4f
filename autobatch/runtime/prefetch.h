/* Prefetching the nodes a per-node loop will reach: a batch gathers its nodes from
   every instance, so they lie anywhere in the node array and each one read is a
   cache miss unless fetched ahead. Macros, not functions: GCC drops a call to a
   function that only prefetches (it has no side effects). */
#ifndef AB_PREFETCH_H
#define AB_PREFETCH_H

/* at node j, a loop over nodes fetches node j + AB_AHEAD and the arguments of node
   j + AB_AHEAD / 2 (whose own node came in earlier) */
#define AB_AHEAD 8

/* a Node is 96 bytes: two cache lines */
#define AB_PREFETCH_NODE(n) (__builtin_prefetch(n), __builtin_prefetch((const char*)(n) + 64))
/* argument a of node i of NodeView v (its own node fetched earlier) */
#define AB_PREFETCH_ARG(v, i, a) AB_PREFETCH_NODE(&(v)->nodes[(v)->args[(v)->nodes[i].args_at + (a)]])
/* at node j of ids[0..end): node j + AB_AHEAD, and the first nargs arguments of node
   j + AB_AHEAD / 2 */
#define AB_PREFETCH_AHEAD(v, ids, j, end, nargs) do { \
        if ((j) + AB_AHEAD < (end)) AB_PREFETCH_NODE(&(v)->nodes[(ids)[(j) + AB_AHEAD]]); \
        if ((j) + AB_AHEAD / 2 < (end)) \
            for (int ab_a_ = 0; ab_a_ < (nargs); ab_a_++) \
                AB_PREFETCH_ARG(v, (ids)[(j) + AB_AHEAD / 2], ab_a_); \
    } while (0)

#endif
