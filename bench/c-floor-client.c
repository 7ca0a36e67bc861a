// c-floor-client: closed-loop ping-pong against c-floor-server (or any server speaking the same
// frames: 4-byte big-endian length N, then N bytes; one reply frame per request frame).
//
//   c-floor-client --socket PATH --connections N --seconds S [--payload BYTES]
//   c-floor-client --socket PATH --connections N --seconds S --method METHOD [--profile NAME]
//   c-floor-client --socket PATH --probe      (connect, close, exit 0 if the server accepts)
//
// With --method it is a client of rainwalletd written from proto/PROTOCOL.md alone: each frame is an
// Envelope {request_id, Request {method, metadata profile}} with an empty request message, encoded
// by hand, and each answer must be that call's Response with status code 0 (otherwise the status
// is printed and the client fails), so a figure is never the rate of refusals. One call at a time
// per connection, so one request id per connection is unique among its calls in flight.
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
    const uint8_t *request;  // the frame to send (HEADER + payload bytes); NULL: the floor's filler
    uint64_t request_id;     // with request: the id each answer must carry
    char why[512];           // a refusal's status, which error then points at
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

// ---- the protocol (proto/envelope.proto), by hand: varints and length-delimited fields only.

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

// A length-delimited field: tag, length, bytes.
static size_t put_bytes(uint8_t *p, unsigned field, const void *bytes, size_t len) {
    size_t n = put_varint(p, (uint64_t)field << 3 | 2);
    n += put_varint(p + n, len);
    memcpy(p + n, bytes, len);
    return n + len;
}

// Reads a varint at *p (< end); returns -1 when it runs past end or is longer than 10 bytes.
static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

// Finds field `want` (varint or length-delimited) among the fields in [p, end). For a
// length-delimited one, *start and *len give its bytes; for a varint, *value. Returns 1 when found,
// 0 when absent, -1 for bytes that do not parse.
static int find_field(const uint8_t *p, const uint8_t *end, unsigned want, const uint8_t **start, size_t *len,
                      uint64_t *value) {
    while (p < end) {
        uint64_t tag, v;
        if (get_varint(&p, end, &tag) < 0) return -1;
        switch (tag & 7) {
        case 0:
            if (get_varint(&p, end, &v) < 0) return -1;
            if ((tag >> 3) == want) {
                *value = v;
                return 1;
            }
            break;
        case 1:
            if (end - p < 8) return -1;
            p += 8;
            break;
        case 2:
            if (get_varint(&p, end, &v) < 0 || v > (uint64_t)(end - p)) return -1;
            if ((tag >> 3) == want) {
                *start = p;
                *len = (size_t)v;
                return 1;
            }
            p += v;
            break;
        case 5:
            if (end - p < 4) return -1;
            p += 4;
            break;
        default: return -1;
        }
    }
    return 0;
}

// Encodes the frame of a call to `method` for `profile` (NULL: none) with id `id` into buf
// (capacity at least 64 + the two names); returns its length with the header.
static size_t encode_call(uint8_t *buf, const char *method, const char *profile, uint64_t id) {
    uint8_t request[1024], entry[512];
    size_t r = put_bytes(request, 1, method, strlen(method));
    if (profile) {
        size_t e = put_bytes(entry, 1, "profile", 7);
        e += put_bytes(entry + e, 2, profile, strlen(profile));
        r += put_bytes(request + r, 4, entry, e);
    }
    size_t n = HEADER;
    n += put_varint(buf + n, 1 << 3 | 0);
    n += put_varint(buf + n, id);
    n += put_bytes(buf + n, 2, request, r);
    uint32_t body = (uint32_t)(n - HEADER);
    buf[0] = (uint8_t)(body >> 24);
    buf[1] = (uint8_t)(body >> 16);
    buf[2] = (uint8_t)(body >> 8);
    buf[3] = (uint8_t)body;
    return n;
}

// Checks an answer frame: the call's own Response, status code 0. Returns NULL when it is, or
// what is wrong (the status message for a refusal, copied into `why`).
static const char *check_answer(const uint8_t *frame, uint64_t id, char *why, size_t why_len) {
    uint32_t n = ((uint32_t)frame[0] << 24) | ((uint32_t)frame[1] << 16) | ((uint32_t)frame[2] << 8) | frame[3];
    const uint8_t *p = frame + HEADER, *end = p + n, *response, *status, *message, *unused;
    size_t response_len, status_len, message_len, unused_len;
    uint64_t got_id = 0, code = 0;
    if (find_field(p, end, 1, &unused, &unused_len, &got_id) < 0 || got_id != id)
        return "an answer with another request id";
    if (find_field(p, end, 3, &response, &response_len, &code) != 1) return "an answer that is not a Response";
    int found = find_field(response, response + response_len, 1, &status, &status_len, &code);
    if (found < 0) return "a Response that does not parse";
    if (found == 0) return NULL;  // no Status: code 0
    code = 0;
    if (find_field(status, status + status_len, 1, &unused, &unused_len, &code) < 0)
        return "a Status that does not parse";
    if (code == 0) return NULL;
    if (find_field(status, status + status_len, 2, &message, &message_len, &code) != 1) message_len = 0;
    snprintf(why, why_len, "RAIN_%03llu %.*s", (unsigned long long)code, (int)message_len,
             message_len ? (const char *)message : "");
    return why;
}

static void *run(void *arg) {
    worker_t *w = arg;
    uint8_t *req = malloc(HEADER + w->payload);
    uint8_t *rsp = malloc(HEADER + MAX_FRAME);
    if (!req || !rsp) {
        w->error = "out of memory";
        goto out;
    }
    if (w->request) {
        memcpy(req, w->request, HEADER + w->payload);
    } else {
        uint32_t n = (uint32_t)w->payload;
        req[0] = (uint8_t)(n >> 24);
        req[1] = (uint8_t)(n >> 16);
        req[2] = (uint8_t)(n >> 8);
        req[3] = (uint8_t)n;
        for (size_t i = 0; i < w->payload; i++) req[HEADER + i] = (uint8_t)('a' + i % 26);
    }

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
        if (w->request && (w->error = check_answer(rsp, w->request_id, w->why, sizeof w->why))) break;
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
            "       c-floor-client --socket PATH --connections N --seconds S --method METHOD [--profile NAME]\n"
            "       c-floor-client --socket PATH --probe\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *path = NULL, *method = NULL, *profile = NULL;
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
        } else if (!strcmp(a, "--method")) {
            method = v;
            if (strlen(method) > 256) usage();
        } else if (!strcmp(a, "--profile")) {
            profile = v;
            if (strlen(profile) > 128) usage();
        } else if (!strcmp(a, "--payload")) {
            payload = strtol(v, &end, 10);
            if (*end || payload < 0 || payload > (long)MAX_FRAME) usage();
        } else {
            usage();
        }
    }
    if (!path || (profile && !method)) usage();
    signal(SIGPIPE, SIG_IGN);
    uint8_t call[1024];
    if (method) payload = (long)(encode_call(call, method, profile, 1) - HEADER);

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
        ws[i].request = method ? call : NULL;
        ws[i].request_id = 1;
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
