// c-floor-client: closed-loop ping-pong against c-floor-server (or any server speaking the same
// frames: 4-byte big-endian length N, then N bytes; one reply frame per request frame).
//
//   c-floor-client --socket PATH --connections N --seconds S [--payload BYTES]
//   c-floor-client --socket PATH --probe      (connect, close, exit 0 if the server accepts)
//
// N threads, each with its own connection, write one frame and read the full reply frame, in a loop,
// for 0.5 s of warm-up (not counted) and then S seconds. Each round trip is timed with
// CLOCK_MONOTONIC into a per-thread array. At the end it prints exactly one JSON line to stdout:
//   {"calls":123,"seconds":2.000,"callsPerSecond":61.5,"p50Micros":8.7,"p99Micros":15.2,"connections":N}
// calls counts the round trips started after the warm-up; seconds is the measured window (from the
// end of the warm-up to the last reply); percentiles are nearest-rank over all threads' samples.
// Errors go to stderr with a non-zero exit status.
//
// Build: gcc -O2 -pthread -o c-floor-client c-floor-client.c
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME (1u << 20)
#define HEADER 4u
#define WARMUP_NS 500000000LL

typedef struct {
    int fd;
    int64_t warm_end_ns;  // samples are recorded for calls starting at or after this
    int64_t end_ns;       // no call starts at or after this
    size_t payload;
    uint32_t *samples;  // round-trip nanoseconds (saturating at ~4.29 s)
    size_t count, cap;
    int64_t last_reply_ns;
    const char *error;  // NULL on success
    int err_no;
} worker_t;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int connect_unix(const char *path) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int send_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

// Reads one reply frame into buf (capacity HEADER + MAX_FRAME). Returns 0, or -1 with errno
// (0 for "server closed the connection", EPROTO for an oversized frame).
static int read_frame(int fd, uint8_t *buf) {
    size_t have = 0, want = HEADER;
    int header_done = 0;
    for (;;) {
        while (have < want) {
            ssize_t r = recv(fd, buf + have, HEADER + MAX_FRAME - have, 0);
            if (r < 0) {
                if (errno == EINTR) continue;
                return -1;
            }
            if (r == 0) {
                errno = 0;
                return -1;
            }
            have += (size_t)r;
        }
        if (header_done) break;
        uint32_t n = ((uint32_t)buf[0] << 24) | ((uint32_t)buf[1] << 16) | ((uint32_t)buf[2] << 8) | buf[3];
        if (n > MAX_FRAME) {
            errno = EPROTO;
            return -1;
        }
        want = HEADER + n;
        header_done = 1;
    }
    if (have != want) {  // closed loop: nothing may follow the reply
        errno = EPROTO;
        return -1;
    }
    return 0;
}

static void *run(void *arg) {
    worker_t *w = arg;
    uint8_t *req = malloc(HEADER + w->payload);
    uint8_t *rsp = malloc(HEADER + MAX_FRAME);
    if (!req || !rsp) {
        w->error = "out of memory";
        goto out;
    }
    uint32_t n = (uint32_t)w->payload;
    req[0] = (uint8_t)(n >> 24);
    req[1] = (uint8_t)(n >> 16);
    req[2] = (uint8_t)(n >> 8);
    req[3] = (uint8_t)n;
    for (size_t i = 0; i < w->payload; i++) req[HEADER + i] = (uint8_t)('a' + i % 26);

    for (;;) {
        int64_t t0 = now_ns();
        if (t0 >= w->end_ns) break;
        if (send_all(w->fd, req, HEADER + w->payload) < 0) {
            w->error = "send";
            w->err_no = errno;
            break;
        }
        if (read_frame(w->fd, rsp) < 0) {
            w->error = errno == 0 ? "server closed the connection" : "recv";
            w->err_no = errno;
            break;
        }
        int64_t t1 = now_ns();
        if (t0 < w->warm_end_ns) continue;
        if (w->count == w->cap) {
            size_t cap = w->cap ? w->cap * 2 : 65536;
            uint32_t *s = realloc(w->samples, cap * sizeof *s);
            if (!s) {
                w->error = "out of memory";
                break;
            }
            w->samples = s;
            w->cap = cap;
        }
        int64_t d = t1 - t0;
        w->samples[w->count++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
        w->last_reply_ns = t1;
    }
out:
    free(req);
    free(rsp);
    return NULL;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

// Nearest-rank percentile of sorted samples, in microseconds.
static double percentile_us(const uint32_t *s, size_t n, double p) {
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999999);  // ceil
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return s[rank - 1] / 1000.0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: c-floor-client --socket PATH --connections N --seconds S [--payload BYTES]\n"
            "       c-floor-client --socket PATH --probe\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    long conns = 1, payload = 64;
    double seconds = 2.0;
    int probe = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--probe")) {
            probe = 1;
            continue;
        }
        if (i + 1 >= argc) usage();
        const char *v = argv[++i];
        char *end = NULL;
        if (!strcmp(a, "--socket")) {
            path = v;
        } else if (!strcmp(a, "--connections")) {
            conns = strtol(v, &end, 10);
            if (*end || conns < 1 || conns > 4096) usage();
        } else if (!strcmp(a, "--seconds")) {
            seconds = strtod(v, &end);
            if (*end || !(seconds > 0) || seconds > 86400) usage();
        } else if (!strcmp(a, "--payload")) {
            payload = strtol(v, &end, 10);
            if (*end || payload < 0 || payload > (long)MAX_FRAME) usage();
        } else {
            usage();
        }
    }
    if (!path) usage();
    signal(SIGPIPE, SIG_IGN);

    if (probe) {
        int fd = connect_unix(path);
        if (fd < 0) return 1;
        close(fd);
        return 0;
    }

    worker_t *ws = calloc((size_t)conns, sizeof *ws);
    pthread_t *ts = calloc((size_t)conns, sizeof *ts);
    if (!ws || !ts) {
        fprintf(stderr, "c-floor-client: out of memory\n");
        return 1;
    }
    for (long i = 0; i < conns; i++) {
        ws[i].fd = connect_unix(path);
        if (ws[i].fd < 0) {
            fprintf(stderr, "c-floor-client: connect %s (connection %ld of %ld): %s\n", path, i + 1, conns,
                    strerror(errno));
            return 1;
        }
    }
    int64_t start = now_ns();
    int64_t warm_end = start + WARMUP_NS;
    int64_t end = warm_end + (int64_t)(seconds * 1e9);
    for (long i = 0; i < conns; i++) {
        ws[i].warm_end_ns = warm_end;
        ws[i].end_ns = end;
        ws[i].payload = (size_t)payload;
        int rc = pthread_create(&ts[i], NULL, run, &ws[i]);
        if (rc != 0) {
            fprintf(stderr, "c-floor-client: pthread_create: %s\n", strerror(rc));
            return 1;
        }
    }
    size_t total = 0;
    int64_t last = warm_end;
    int failed = 0;
    for (long i = 0; i < conns; i++) {
        pthread_join(ts[i], NULL);
        close(ws[i].fd);
        if (ws[i].error) {
            fprintf(stderr, "c-floor-client: connection %ld: %s%s%s\n", i + 1, ws[i].error, ws[i].err_no ? ": " : "",
                    ws[i].err_no ? strerror(ws[i].err_no) : "");
            failed = 1;
        }
        total += ws[i].count;
        if (ws[i].last_reply_ns > last) last = ws[i].last_reply_ns;
    }
    if (failed) return 1;
    if (total == 0) {
        fprintf(stderr, "c-floor-client: no call completed after the warm-up\n");
        return 1;
    }

    uint32_t *all = malloc(total * sizeof *all);
    if (!all) {
        fprintf(stderr, "c-floor-client: out of memory\n");
        return 1;
    }
    size_t k = 0;
    for (long i = 0; i < conns; i++) {
        memcpy(all + k, ws[i].samples, ws[i].count * sizeof *all);
        k += ws[i].count;
        free(ws[i].samples);
    }
    qsort(all, total, sizeof *all, cmp_u32);
    double window = (double)(last - warm_end) / 1e9;
    if (window <= 0) window = seconds;
    printf("{\"calls\":%zu,\"seconds\":%.3f,\"callsPerSecond\":%.1f,\"p50Micros\":%.1f,\"p99Micros\":%.1f,"
           "\"connections\":%ld}\n",
           total, window, (double)total / window, percentile_us(all, total, 50), percentile_us(all, total, 99), conns);
    fflush(stdout);
    free(all);
    free(ws);
    free(ts);
    return 0;
}
