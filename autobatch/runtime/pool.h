/* A small thread pool for the engine's kernels: ab_pool_run(fn, ctx, n) runs
 * fn(ctx, 0..n-1) on the calling thread and the pool's workers together.
 *
 * Chunks are claimed one at a time through one 64-bit ticket (job number << 32 | next
 * chunk), so a worker that wakes late, or is descheduled on a busy machine, claims
 * nothing of a job that has moved on: the caller then runs the chunks itself and waits
 * only for a chunk a worker has already started. After a job a worker polls for the
 * next one (a step's next product follows within microseconds; waking a sleeping
 * thread costs ~100-200 us): AB_PAUSE_NS with the `pause` instruction, then up to
 * AB_SPIN_NS calling sched_yield() between looks, so that on a machine whose cores are
 * busy with other work the waiting worker hands its core to whatever else is ready
 * to run there (the calling thread among them); then it sleeps. The caller waiting for
 * a started chunk yields in the same way after AB_PAUSE_NS.
 *
 * Backing off: when the workers do not come (the caller ran every chunk while they
 * were meant to be polling) or came so late that the caller waited longer for their
 * chunk than it took for its own, their cores are busy with other work; the next
 * jobs (1, 2, 4, ... up to AB_BACKOFF_MAX in a row, halved again after a job that
 * paid) run on the calling thread alone, so that a loaded machine gets about the
 * speed of one thread. A job run alone computes the same chunks, so the numbers do
 * not change.
 *
 * One job at a time: a second thread's ab_pool_run (two threads each computing their
 * own graph), or one from inside a chunk, runs its chunks inline. After fork() the
 * child has no workers (pthread_atfork), so it runs everything inline. */
#ifndef AUTOBATCH_POOL_H
#define AUTOBATCH_POOL_H
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

#define AB_MAX_THREADS 64
#define AB_PAUSE_NS 20000          /* a waiting thread spins with `pause` this long, */
#define AB_SPIN_NS 200000          /* then yields between looks up to this, then sleeps */
#define AB_BACKOFF_MAX 1024        /* the most jobs in a row run alone after a lost one */

/* what ab_pool_run did (ab_pool.stat[]): every counter is the caller's, under busy */
enum { AB_STAT_JOBS, AB_STAT_SHARED, AB_STAT_BUSY, AB_STAT_BACKED_OFF, AB_STAT_MISSED,
       AB_STAT_LATE, AB_N_STATS };

typedef void (*ab_chunk_fn)(void *ctx, int chunk);

static struct ab_pool_state {
    pthread_t tid[AB_MAX_THREADS];
    int workers;                   /* threads besides the caller */
    ab_chunk_fn fn;                /* the current job: valid while its chunks run */
    void *ctx;
    int chunks;
    uint64_t ticket;               /* job << 32 | next chunk to claim (atomic) */
    int done;                      /* chunks of the current job finished (atomic) */
    int stop;                      /* workers end (atomic) */
    int sleepers;                  /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_mutex_t busy;          /* held by the thread whose job runs */
    int skip;                      /* jobs still to run alone (backing off; under busy) */
    int backoff;                   /* how many the next lost job makes skip (under busy) */
    uint64_t stat[AB_N_STATS];     /* under busy; AB_STAT_JOBS and AB_STAT_BUSY atomic */
    double waited_ns;              /* the callers' waits for started chunks (under busy) */
} ab_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
             .busy = PTHREAD_MUTEX_INITIALIZER, .backoff = 1};

static inline void ab_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline double ab_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Claim and run chunks of job `job` until none is left or the job has changed;
 * returns how many this thread ran. */
static int ab_pool_work(uint32_t job) {
    uint64_t t = __atomic_load_n(&ab_pool.ticket, __ATOMIC_ACQUIRE);
    int ran = 0;
    for (;;) {
        if ((uint32_t)(t >> 32) != job)
            return ran;
        /* read after the ticket (acquire): the job these chunks belong to */
        ab_chunk_fn fn = ab_pool.fn;
        void *ctx = ab_pool.ctx;
        int chunks = ab_pool.chunks;
        uint32_t next = (uint32_t)t;
        if ((int)next >= chunks)
            return ran;
        if (__atomic_compare_exchange_n(&ab_pool.ticket, &t, t + 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            fn(ctx, (int)next);
            ran++;
            __atomic_fetch_add(&ab_pool.done, 1, __ATOMIC_RELEASE);
            t = __atomic_load_n(&ab_pool.ticket, __ATOMIC_ACQUIRE);
        }   /* else t holds the ticket's current value: look again */
    }
}

/* One look of a waiting thread that has waited since `start` (ns): `pause` at first,
 * then sched_yield(); 0 once it has waited AB_SPIN_NS (time to sleep). The clock is
 * read every 64 looks only (~25 ns a read). */
static inline int ab_wait_a_little(double start, int *looks) {
    if (++*looks % 64 == 0) {
        double waited = ab_now_ns() - start;
        if (waited > AB_SPIN_NS)
            return 0;
        if (waited > AB_PAUSE_NS)
            *looks = -(1 << 30);            /* from now on, yield at every look */
    }
    if (*looks < 0)
        sched_yield();
    else
        ab_relax();
    return 1;
}

static inline uint32_t ab_current_job(void) {
    return (uint32_t)(__atomic_load_n(&ab_pool.ticket, __ATOMIC_ACQUIRE) >> 32);
}

static void *ab_pool_worker(void *unused) {
    (void)unused;
    uint32_t seen = ab_current_job();
    for (;;) {
        double start = ab_now_ns();
        int looks = 0;
        uint32_t job;
        while ((job = ab_current_job()) == seen) {
            if (__atomic_load_n(&ab_pool.stop, __ATOMIC_ACQUIRE))
                return NULL;
            if (!ab_wait_a_little(start, &looks)) {
                pthread_mutex_lock(&ab_pool.mu);
                ab_pool.sleepers++;
                while (ab_current_job() == seen && !__atomic_load_n(&ab_pool.stop, __ATOMIC_ACQUIRE))
                    pthread_cond_wait(&ab_pool.wake, &ab_pool.mu);
                ab_pool.sleepers--;
                pthread_mutex_unlock(&ab_pool.mu);
                start = ab_now_ns();
                looks = 0;
            }
        }
        seen = job;
        ab_pool_work(job);
    }
}

static void ab_pool_stop_workers(void) {
    __atomic_store_n(&ab_pool.stop, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&ab_pool.mu);
    pthread_cond_broadcast(&ab_pool.wake);
    pthread_mutex_unlock(&ab_pool.mu);
    for (int i = 0; i < ab_pool.workers; i++)
        pthread_join(ab_pool.tid[i], NULL);
    ab_pool.workers = 0;
    __atomic_store_n(&ab_pool.stop, 0, __ATOMIC_RELEASE);
}

static void ab_pool_after_fork_child(void) {
    /* the workers did not come along; the locks may have been held by them */
    ab_pool.workers = 0;
    ab_pool.sleepers = 0;
    pthread_mutex_init(&ab_pool.mu, NULL);
    pthread_cond_init(&ab_pool.wake, NULL);
    pthread_mutex_init(&ab_pool.busy, NULL);
}

/* Use n threads in all (the caller and n - 1 workers); 0 on success, else the
 * pthread_create error (the pool then has the workers it could start). */
static int ab_pool_resize(int n) {
    static int atfork_done = 0;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, ab_pool_after_fork_child);
        atfork_done = 1;
    }
    if (n < 1)
        n = 1;
    if (n > AB_MAX_THREADS)
        n = AB_MAX_THREADS;
    pthread_mutex_lock(&ab_pool.busy);        /* no job runs while the pool changes */
    ab_pool_stop_workers();         /* (the back-off state stays: the machine's load does) */
    int err = 0;
    /* the workers start with every signal blocked (they inherit this thread's mask), so
     * that a signal for the process (Ctrl-C, a timer) goes to a thread that runs
     * Python's handlers and interrupts the main thread's blocking calls */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < n - 1; i++) {
        err = pthread_create(&ab_pool.tid[i], NULL, ab_pool_worker, NULL);
        if (err)
            break;
        ab_pool.workers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_unlock(&ab_pool.busy);
    return err;
}

static inline int ab_pool_threads(void) {
    return ab_pool.workers + 1;
}

/* After a shared job: back off when it lost (see the top of this file). `mine`: the
 * chunks the caller ran, in `own_ns`; `wait_ns`: its wait for the workers' chunks;
 * `slept`: a worker was asleep when the job began (waking takes a while: no verdict). */
static void ab_pool_judge(int mine, int chunks, double own_ns, double wait_ns, int slept) {
    int missed = mine == chunks && !slept;
    int late = mine > 0 && mine < chunks && wait_ns > own_ns;
    ab_pool.stat[AB_STAT_SHARED] += mine < chunks;
    ab_pool.stat[AB_STAT_MISSED] += missed;
    ab_pool.stat[AB_STAT_LATE] += late;
    ab_pool.waited_ns += wait_ns;
    if (missed || late) {
        ab_pool.skip = ab_pool.backoff;
        if (ab_pool.backoff < AB_BACKOFF_MAX)
            ab_pool.backoff *= 2;
    } else if (mine < chunks && ab_pool.backoff > 1) {
        ab_pool.backoff /= 2;
    }
}

/* fn(ctx, c) for c in 0..chunks-1, on this thread and the workers; returns when all
 * have run. Runs them inline when the pool is busy (another thread's job, or a call
 * from inside a chunk), has no workers, or is backing off. */
static void ab_pool_run(ab_chunk_fn fn, void *ctx, int chunks) {
    if (chunks <= 0)
        return;
    int alone = chunks == 1 || ab_pool.workers == 0;
    if (!alone) {
        __atomic_fetch_add(&ab_pool.stat[AB_STAT_JOBS], 1, __ATOMIC_RELAXED);
        if (pthread_mutex_trylock(&ab_pool.busy) != 0) {
            __atomic_fetch_add(&ab_pool.stat[AB_STAT_BUSY], 1, __ATOMIC_RELAXED);
            alone = 1;
        } else if (ab_pool.skip > 0) {
            ab_pool.skip--;
            ab_pool.stat[AB_STAT_BACKED_OFF]++;
            pthread_mutex_unlock(&ab_pool.busy);
            alone = 1;
        }
    }
    if (alone) {
        for (int c = 0; c < chunks; c++)
            fn(ctx, c);
        return;
    }
    uint32_t job = (uint32_t)(__atomic_load_n(&ab_pool.ticket, __ATOMIC_RELAXED) >> 32) + 1;
    ab_pool.fn = fn;
    ab_pool.ctx = ctx;
    ab_pool.chunks = chunks;
    __atomic_store_n(&ab_pool.done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ab_pool.ticket, (uint64_t)job << 32, __ATOMIC_RELEASE);
    pthread_mutex_lock(&ab_pool.mu);
    int slept = ab_pool.sleepers;
    if (slept)
        pthread_cond_broadcast(&ab_pool.wake);
    pthread_mutex_unlock(&ab_pool.mu);
    double start = ab_now_ns();
    int mine = ab_pool_work(job);
    double own_end = ab_now_ns(), wait_end = own_end;
    int looks = 0;
    while (__atomic_load_n(&ab_pool.done, __ATOMIC_ACQUIRE) < chunks) {
        if (!ab_wait_a_little(own_end, &looks))     /* a worker finishes its chunk */
            looks = -(1 << 30);     /* no sleeping here: keep yielding */
        wait_end = 0;
    }
    if (wait_end == 0)
        wait_end = ab_now_ns();
    ab_pool_judge(mine, chunks, own_end - start, wait_end - own_end, slept);
    pthread_mutex_unlock(&ab_pool.busy);
}
#endif
