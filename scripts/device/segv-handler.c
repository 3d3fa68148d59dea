/* A crash reporter to preload where no debugger is installed (the GPU machines): on
 * SIGSEGV, SIGBUS or SIGABRT it prints the faulting thread's id and name, the fault
 * address, a backtrace (library + offset; symbolize cubert's frames here with
 * `addr2line -f -C -i -e <unstripped binary> <offset>`) and every thread's name and wait
 * channel, then dies of the same signal. It found the runner thread in the driver at
 * exit (docs/reliability.md, bug 8).
 *
 *   gcc -shared -fPIC -O1 -o libsegv.so scripts/device/segv-handler.c
 *   LD_PRELOAD=$PWD/libsegv.so ./some-test-binary ...
 *
 * Diagnostic only: the handler calls functions that are not async-signal-safe.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <execinfo.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <stdlib.h>
static void handler(int sig, siginfo_t *info, void *ctx) {
    char buf[256]; int n;
    pid_t tid = syscall(SYS_gettid);
    char path[64]; snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    int fd = open(path, O_RDONLY); char name[64] = {0};
    if (fd >= 0) { read(fd, name, 63); close(fd); }
    n = snprintf(buf, sizeof buf, "\n=== signal %d in thread %d (%s) pid %d main? %d addr %p\n", sig, tid, strtok(name, "\n"), getpid(), tid == getpid(), info->si_addr);
    write(2, buf, n);
    void *frames[64]; int count = backtrace(frames, 64);
    backtrace_symbols_fd(frames, count, 2);
    DIR *d = opendir("/proc/self/task"); struct dirent *e;
    while (d && (e = readdir(d))) { if (e->d_name[0] == '.') continue;
        char p2[96], nm[64] = {0}, st[128] = {0}; snprintf(p2, sizeof p2, "/proc/self/task/%s/comm", e->d_name);
        int f = open(p2, O_RDONLY); if (f >= 0) { read(f, nm, 63); close(f); }
        snprintf(p2, sizeof p2, "/proc/self/task/%s/wchan", e->d_name);
        f = open(p2, O_RDONLY); if (f >= 0) { read(f, st, 127); close(f); }
        n = snprintf(buf, sizeof buf, "  thread %s %s wchan=%s\n", e->d_name, strtok(nm, "\n"), st); write(2, buf, n); }
    if (d) closedir(d);
    signal(sig, SIG_DFL); raise(sig);
}
__attribute__((constructor)) static void install(void) {
    struct sigaction sa; memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler; sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigaction(SIGSEGV, &sa, 0); sigaction(SIGABRT, &sa, 0); sigaction(SIGBUS, &sa, 0);
}
