// c-load-client: many concurrent clients against rainwalletd, for the load figures of scripts/bench.
//
//   c-load-client --socket PATH --pid DAEMON_PID [--clients 1000] [--calls 40] [--think-ms 50:150]
//                 [--stallers 10] [--staller-burst 2000] [--profile NAME] [--mix all|local]
//
// One thread, epoll; it sleeps until the next call is due (no busy wait). It samples the daemon's resident memory (VmRSS of /proc/PID/status) while
// idle, then opens CLIENTS connections plus STALLERS. Each staller writes STALLER-BURST GetInfo
// requests at once and never reads an answer (a slow client). Every client then makes CALLS calls,
// one at a time, waiting a uniformly random think time in the THINK-MS range before each (so the
// offered load is an open-ish loop of about CLIENTS / mean think time calls per second), cycling
// through a mix of methods: Daemon/GetInfo, Session/GetState, Account/Get and Wallet/Get (the last
// two reach the embedded authority: the profile needs a session; scripts/bench logs one in; with
// --mix local only the first two, which the daemon answers on its loop). A
// response whose status code is not 0 is an error. Memory is sampled every 20 ms throughout. After
// the last call every connection is closed and memory is sampled until it settles (up to 5 s).
//
// Prints exactly one JSON line to stdout:
//   {"clients":1000,"stallers":10,"calls":40000,"errors":0,"seconds":…,"callsPerSecond":…,
//    "p50Micros":…,"p99Micros":…,"maxMicros":…,"rssIdleKB":…,"rssConnectedKB":…,"rssPeakKB":…,
//    "rssAfterKB":…}
// Errors (a connection refused or dropped, a malformed answer) go to stderr; exit status 1.
//
// Build (scripts/bench does it): gcc -O2 -I Sources/CRainProto/include bench/c-load-client.c
//   Sources/CRainProto/envelope.pb-c.c -lprotobuf-c
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "envelope.pb-c.h"

#define MAX_FRAME (1u << 20)

static const char *const methods[] = {
    "/rain.wallet.v1.Daemon/GetInfo",
    "/rain.wallet.v1.Session/GetState",
    "/rain.wallet.v1.Account/Get",
    "/rain.wallet.v1.Wallet/Get",
};
static unsigned method_count = sizeof methods / sizeof methods[0];
#define METHOD_COUNT method_count

typedef struct {
    int fd;
    int remaining;       // calls still to make
    int in_flight;       // 1 while a request waits for its answer
    int64_t due_ns;      // when the next request is sent (when not in flight)
    int64_t sent_ns;
    uint64_t next_id;
    unsigned method;
    unsigned sent_method;  // the method of the request in flight
    uint8_t *in;
    size_t in_len, in_cap;
} client_t;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "c-load-client: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void fail(const char *message) {
    fprintf(stderr, "c-load-client: %s\n", message);
    exit(1);
}

static long rss_kb(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

static int connect_unix(const char *path) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path) fail("socket path too long");
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    for (int attempt = 0;; attempt++) {
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) break;
        // A full accept backlog answers EAGAIN on a Unix socket: wait for the daemon to accept.
        if ((errno == EAGAIN || errno == EINTR) && attempt < 2000) {
            usleep(1000);
            continue;
        }
        die("connect");
    }
    return fd;
}

// A request frame: 4-byte big-endian length, then the Envelope.
static size_t request_frame(uint8_t *out, size_t cap, uint64_t id, const char *method, const char *profile) {
    Rain__Wallet__V1__MetadataEntry entry = RAIN__WALLET__V1__METADATA_ENTRY__INIT;
    entry.key = "profile";
    entry.value = (char *)profile;
    Rain__Wallet__V1__MetadataEntry *entries[1] = {&entry};
    Rain__Wallet__V1__Request request = RAIN__WALLET__V1__REQUEST__INIT;
    request.method = (char *)method;
    request.n_metadata = 1;
    request.metadata = entries;
    Rain__Wallet__V1__Envelope env = RAIN__WALLET__V1__ENVELOPE__INIT;
    env.request_id = id;
    env.kind_case = RAIN__WALLET__V1__ENVELOPE__KIND_REQUEST;
    env.request = &request;
    size_t n = rain__wallet__v1__envelope__get_packed_size(&env);
    if (n + 4 > cap) fail("request frame too large");
    rain__wallet__v1__envelope__pack(&env, out + 4);
    out[0] = (uint8_t)(n >> 24);
    out[1] = (uint8_t)(n >> 16);
    out[2] = (uint8_t)(n >> 8);
    out[3] = (uint8_t)n;
    return n + 4;
}

static void write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {  // tiny frames: the socket buffer is almost never full
                usleep(100);
                continue;
            }
            die("send");
        }
        p += w;
        n -= (size_t)w;
    }
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static double percentile(const uint32_t *sorted, size_t n, double p) {
    if (n == 0) return 0;
    size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1] / 1000.0;
}

int main(int argc, char **argv) {
    const char *path = NULL, *profile = "default";
    int pid = 0, clients = 1000, calls = 40, stallers = 10, burst = 2000;
    int think_min = 50, think_max = 150;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) fail("every option needs a value (see the comment at the top of bench/c-load-client.c)");
        if (strcmp(a, "--socket") == 0) path = v;
        else if (strcmp(a, "--pid") == 0) pid = atoi(v);
        else if (strcmp(a, "--clients") == 0) clients = atoi(v);
        else if (strcmp(a, "--calls") == 0) calls = atoi(v);
        else if (strcmp(a, "--stallers") == 0) stallers = atoi(v);
        else if (strcmp(a, "--staller-burst") == 0) burst = atoi(v);
        else if (strcmp(a, "--profile") == 0) profile = v;
        else if (strcmp(a, "--mix") == 0) {
            if (strcmp(v, "local") == 0) method_count = 2;  // GetInfo and Session/GetState only
            else if (strcmp(v, "all") != 0) fail("--mix wants all or local");
        }
        else if (strcmp(a, "--think-ms") == 0) {
            if (sscanf(v, "%d:%d", &think_min, &think_max) != 2 || think_min < 0 || think_max < think_min)
                fail("--think-ms wants MIN:MAX milliseconds");
        } else fail("unknown option");
        i++;
    }
    if (!path || pid <= 0 || clients <= 0 || calls <= 0 || stallers < 0 || burst < 0)
        fail("usage: --socket PATH --pid DAEMON_PID [--clients N] [--calls K] [--think-ms MIN:MAX] [--stallers S]");
    signal(SIGPIPE, SIG_IGN);
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;  // 1,000 clients need more than the default 1024
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    srand((unsigned)now_ns());

    long rss_idle = rss_kb(pid), rss_peak = rss_idle;
    if (rss_idle < 0) fail("cannot read the daemon's /proc/PID/status");

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    client_t *cs = calloc((size_t)clients, sizeof *cs);
    int *stall_fds = calloc((size_t)stallers + 1, sizeof *stall_fds);
    size_t total = (size_t)clients * (size_t)calls;
    uint32_t *lat = malloc(total * sizeof *lat);
    uint32_t *lat_by[4];
    size_t done_by[4] = {0, 0, 0, 0};
    for (int m = 0; m < 4; m++) {
        lat_by[m] = malloc(total * sizeof *lat);
        if (!lat_by[m]) fail("out of memory");
    }
    if (!cs || !stall_fds || !lat) fail("out of memory");
    uint8_t frame[512];

    int64_t t_start = now_ns();
    for (int i = 0; i < clients; i++) {
        client_t *c = &cs[i];
        c->fd = connect_unix(path);
        fcntl(c->fd, F_SETFL, O_NONBLOCK);
        c->remaining = calls;
        c->next_id = 1;
        c->method = (unsigned)i % METHOD_COUNT;
        c->in_cap = 4096;
        c->in = malloc(c->in_cap);
        if (!c->in) fail("out of memory");
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
    }
    for (int s = 0; s < stallers; s++) {
        stall_fds[s] = connect_unix(path);
        for (int k = 0; k < burst; k++) {
            size_t n = request_frame(frame, sizeof frame, (uint64_t)k + 1, methods[0], profile);
            // A blocking write: the daemon reads requests until its answers fill the socket.
            ssize_t w = send(stall_fds[s], frame, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0) break;  // its buffers are full: the rest would block; it stalls here
        }
    }
    usleep(200000);
    long rss_connected = rss_kb(pid);
    if (rss_connected > rss_peak) rss_peak = rss_connected;

    int64_t t0 = now_ns();
    for (int i = 0; i < clients; i++) cs[i].due_ns = t0 + (int64_t)(rand() % (think_max + 1)) * 1000000LL;
    size_t done = 0, errors = 0;
    int64_t next_sample = t0;
    struct epoll_event events[256];
    while (done < total) {
        int64_t now = now_ns();
        if (now >= next_sample) {
            long r = rss_kb(pid);
            if (r > rss_peak) rss_peak = r;
            next_sample = now + 20000000LL;
        }
        int64_t soonest = next_sample;
        for (int i = 0; i < clients; i++) {
            client_t *c = &cs[i];
            if (c->in_flight || c->remaining == 0) continue;
            if (c->due_ns <= now) {
                size_t n = request_frame(frame, sizeof frame, c->next_id++, methods[c->method], profile);
                c->sent_method = c->method;
                c->method = (c->method + 1) % METHOD_COUNT;
                c->sent_ns = now_ns();
                write_all(c->fd, frame, n);
                c->in_flight = 1;
            } else if (c->due_ns < soonest) {
                soonest = c->due_ns;
            }
        }
        // Sleep until the next call is due, to the microsecond (epoll_pwait2): a millisecond
        // timeout would round the last millisecond down to 0 and spin, and a spinning client takes
        // a whole core from the daemon it measures.
        int64_t wait_ns = soonest - now_ns();
        if (wait_ns < 0) wait_ns = 0;
        struct timespec timeout = {.tv_sec = wait_ns / 1000000000LL, .tv_nsec = wait_ns % 1000000000LL};
        int n = epoll_pwait2(ep, events, 256, &timeout, NULL);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int e = 0; e < n; e++) {
            client_t *c = &cs[events[e].data.u32];
            for (;;) {
                if (c->in_len == c->in_cap) {
                    c->in_cap *= 2;
                    c->in = realloc(c->in, c->in_cap);
                    if (!c->in) fail("out of memory");
                }
                ssize_t r = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
                if (r < 0) {
                    if (errno == EINTR) continue;
                    if (errno == EAGAIN) break;
                    die("read");
                }
                if (r == 0) fail("the daemon closed a client's connection");
                c->in_len += (size_t)r;
            }
            while (c->in_len >= 4) {
                uint32_t len = (uint32_t)c->in[0] << 24 | (uint32_t)c->in[1] << 16 | (uint32_t)c->in[2] << 8 | c->in[3];
                if (len > MAX_FRAME) fail("answer frame over the maximum");
                if (c->in_len < 4 + (size_t)len) break;
                int64_t t = now_ns();
                Rain__Wallet__V1__Envelope *env = rain__wallet__v1__envelope__unpack(NULL, len, c->in + 4);
                if (!env || env->kind_case != RAIN__WALLET__V1__ENVELOPE__KIND_RESPONSE) fail("malformed answer");
                if (!c->in_flight) fail("an answer nobody asked for");
                Rain__Wallet__V1__Status *st = env->response->status;
                if (st && st->code != 0) {
                    if (errors < 5) fprintf(stderr, "c-load-client: error %u: %s\n", st->code, st->message);
                    errors++;
                }
                rain__wallet__v1__envelope__free_unpacked(env, NULL);
                int64_t d = t - c->sent_ns;
                lat[done++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
                lat_by[c->sent_method][done_by[c->sent_method]++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
                c->in_flight = 0;
                c->remaining--;
                c->due_ns = t + (int64_t)(think_min + rand() % (think_max - think_min + 1)) * 1000000LL;
                memmove(c->in, c->in + 4 + len, c->in_len - 4 - len);
                c->in_len -= 4 + (size_t)len;
            }
        }
    }
    int64_t t1 = now_ns();
    long r = rss_kb(pid);
    if (r > rss_peak) rss_peak = r;

    for (int i = 0; i < clients; i++) close(cs[i].fd);
    for (int s = 0; s < stallers; s++) close(stall_fds[s]);
    // Memory after everyone left: the daemon gives free heap back once its loop is idle (200 ms);
    // sampled every 250 ms until three readings agree, up to 5 s.
    long rss_after = rss_kb(pid);
    for (int k = 0, same = 0; k < 20 && same < 2; k++) {
        usleep(250000);
        long r2 = rss_kb(pid);
        same = r2 == rss_after ? same + 1 : 0;
        rss_after = r2;
    }

    qsort(lat, done, sizeof *lat, cmp_u32);
    for (int m = 0; m < 4; m++) qsort(lat_by[m], done_by[m], sizeof *lat, cmp_u32);
    double secs = (double)(t1 - t0) / 1e9;
    printf("{\"clients\":%d,\"stallers\":%d,\"calls\":%zu,\"errors\":%zu,\"seconds\":%.3f,\"callsPerSecond\":%.1f,"
           "\"p50Micros\":%.1f,\"p99Micros\":%.1f,\"maxMicros\":%.1f,\"connectSeconds\":%.3f,\"rssIdleKB\":%ld,"
           "\"rssConnectedKB\":%ld,\"rssPeakKB\":%ld,\"rssAfterKB\":%ld,"
           "\"p99ByMethodMicros\":{\"GetInfo\":%.1f,\"GetState\":%.1f,\"AccountGet\":%.1f,\"WalletGet\":%.1f}}\n",
           clients, stallers, done, errors, secs, (double)done / secs, percentile(lat, done, 50),
           percentile(lat, done, 99), percentile(lat, done, 100), (double)(t0 - t_start) / 1e9, rss_idle,
           rss_connected, rss_peak, rss_after, percentile(lat_by[0], done_by[0], 99),
           percentile(lat_by[1], done_by[1], 99), percentile(lat_by[2], done_by[2], 99),
           percentile(lat_by[3], done_by[3], 99));
    return errors == 0 ? 0 : 1;
}
