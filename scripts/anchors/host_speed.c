// A host-only control for the allocation-throughput figures: the kind of work one cubert
// alloc + free pair does on the caller (a small heap allocation and its free, an insert into
// and a removal from an open-addressing table, a few atomics), with no cubert and no driver.
// Each process prints three rates in M iterations/s; run several processes one after the
// other next to `cubert bench --only alloc` to see whether their spread follows the host.
//     cc -O2 -o /tmp/host_speed scripts/anchors/host_speed.c && /tmp/host_speed
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SLOTS 4096

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    static uint64_t keys[SLOTS];
    static _Atomic uint64_t counter;
    uint64_t id = 1, sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        const long iterations = 2000000;
        double start = now();
        for (long i = 0; i < iterations; i++) {
            uint64_t *record = malloc(48);
            record[0] = id;
            uint64_t slot = (id * 0x517cc1b727220a95ull) >> 52;
            while (keys[slot & (SLOTS - 1)]) slot++;
            keys[slot & (SLOTS - 1)] = id;
            atomic_fetch_add(&counter, 1);
            sink += record[0];
            keys[slot & (SLOTS - 1)] = 0;
            atomic_fetch_add(&counter, 1);
            free(record);
            id++;
        }
        printf("%.2f ", iterations / (now() - start) / 1e6);
    }
    printf("(sink %llu)\n", (unsigned long long)(sink & 1));
    return 0;
}
