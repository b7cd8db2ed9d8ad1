/* A test's clock for one process: LD_PRELOAD it, and CLOCK_REALTIME (what the system time
 * reads) is shifted by the milliseconds written in $PROOFGATE_TEST_CLOCK_SHIFT_FILE, read on
 * each call so a test can step the clock of a running server. The monotonic clock (timers,
 * timeouts) is left alone. Built by crates/proxy/tests/proxy_e2e.rs with the system's cc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long shift_ms(void) {
    const char *path = getenv("PROOFGATE_TEST_CLOCK_SHIFT_FILE");
    long long ms = 0;
    FILE *f;
    if (!path || !(f = fopen(path, "r"))) return 0;
    if (fscanf(f, "%lld", &ms) != 1) ms = 0;
    fclose(f);
    return ms;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int r = real(clk, ts);
    if (r == 0 && clk == CLOCK_REALTIME) {
        long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + shift_ms() * 1000000LL;
        ts->tv_sec = ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
    }
    return r;
}
