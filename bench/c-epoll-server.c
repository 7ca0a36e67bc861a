// c-epoll-server: the floor for a server built as rainwalletd is, on event loops.
//
//   c-epoll-server PATH [LOOPS]
//
// Listens on the Unix socket PATH and serves every connection from LOOPS threads (default 1), each
// waiting on its own epoll instance, as rainwalletd's one loop thread does; c-floor-server instead
// gives each connection a thread of its own. Loop 0 accepts and hands the connections to the loops
// in turn. Each readable socket gets one recv and one send of what was read: the reply frame is
// the request frame (c-floor-client's frames: a 4-byte big-endian length, then the bytes), so an
// echo of the byte stream is the reply, with no per-frame work at all. SIGTERM/SIGINT unlink the
// socket and exit.
//
// scripts/bench --epoll-floor runs it with 1 and with 2 loops beside the floor: how much of the
// floor a server on one loop can reach on this machine, whatever its per-call cost.
//
// Build: gcc -O2 -pthread -o c-epoll-server c-epoll-server.c
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_LOOPS 64
#define BUF_CAP (64 * 1024)

static const char *g_path;
static int g_listen_fd = -1;
static int g_loops = 1;
static int g_epoll[MAX_LOOPS];

static void on_signal(int sig) {
    (void)sig;
    if (g_path) unlink(g_path);  // async-signal-safe
    _exit(0);
}

static void fail(const char *what) {
    fprintf(stderr, "c-epoll-server: %s: %s\n", what, strerror(errno));
    if (g_path) unlink(g_path);
    exit(1);
}

static void watch(int epfd, int fd) {
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) fail("epoll_ctl");
}

// Accepts every pending connection, handing them to the loops in turn.
static void accept_all(void) {
    static unsigned next = 0;
    for (;;) {
        int fd = accept4(g_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return;
            fail("accept4");
        }
        watch(g_epoll[next++ % (unsigned)g_loops], fd);
    }
}

// Sends all of p[0..<n] on the non-blocking socket fd (a 64-byte reply fits its buffer; a full
// buffer is waited out). Returns -1 when the peer is gone.
static int send_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void *loop(void *arg) {
    int index = (int)(intptr_t)arg;
    int epfd = g_epoll[index];
    static __thread uint8_t buf[BUF_CAP];
    struct epoll_event events[128];
    for (;;) {
        int n = epoll_wait(epfd, events, 128, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == g_listen_fd) {
                accept_all();
                continue;
            }
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
            if (r <= 0 || send_all(fd, buf, (size_t)r) != 0) close(fd);  // closing also unwatches
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: c-epoll-server PATH [LOOPS]\n");
        return 2;
    }
    if (argc == 3) {
        char *end = NULL;
        long loops = strtol(argv[2], &end, 10);
        if (*argv[2] == '\0' || *end != '\0' || loops < 1 || loops > MAX_LOOPS) {
            fprintf(stderr, "c-epoll-server: LOOPS must be 1 to %d, got '%s'\n", MAX_LOOPS, argv[2]);
            return 2;
        }
        g_loops = (int)loops;
    }
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(argv[1]) >= sizeof addr.sun_path) {
        fprintf(stderr, "c-epoll-server: socket path too long: %s\n", argv[1]);
        return 2;
    }
    strcpy(addr.sun_path, argv[1]);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    g_listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (g_listen_fd < 0) fail("socket");
    unlink(argv[1]);
    if (bind(g_listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0) fail("bind");
    g_path = argv[1];
    if (listen(g_listen_fd, 128) != 0) fail("listen");
    for (int i = 0; i < g_loops; i++) {
        g_epoll[i] = epoll_create1(EPOLL_CLOEXEC);
        if (g_epoll[i] < 0) fail("epoll_create1");
    }
    watch(g_epoll[0], g_listen_fd);
    for (int i = 1; i < g_loops; i++) {
        pthread_t t;
        int rc = pthread_create(&t, NULL, loop, (void *)(intptr_t)i);
        if (rc != 0) {
            errno = rc;
            fail("pthread_create");
        }
    }
    loop((void *)(intptr_t)0);
    return 0;
}
