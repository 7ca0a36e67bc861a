// c-floor-server: the floor that no daemon can beat.
//
// Listens on the Unix socket path given as argv[1]; one thread per connection. Each request is a
// frame: a 4-byte big-endian length N, then N bytes (N <= 1 MiB). The reply is a frame of the same
// shape echoing the request. Reads are buffered, so a small frame costs one recv and one send, the
// least any length-prefixed server can do. SIGTERM/SIGINT unlink the socket and exit.
//
// Build: gcc -O2 -pthread -o c-floor-server c-floor-server.c
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
#include <unistd.h>

#define MAX_FRAME (1u << 20)
#define HEADER 4u
#define BUF_CAP (HEADER + MAX_FRAME)

static const char *g_path;

static void on_signal(int sig) {
    (void)sig;
    if (g_path) unlink(g_path);  // async-signal-safe
    _exit(0);
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

static void *serve(void *arg) {
    int fd = (int)(intptr_t)arg;
    // Requests are echoed in place: the frame already has the reply's shape.
    uint8_t *buf = malloc(BUF_CAP);
    if (!buf) goto out;
    size_t have = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + have, BUF_CAP - have, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;  // peer closed or error
        have += (size_t)r;
        size_t off = 0;
        int bad = 0;
        while (have - off >= HEADER) {
            const uint8_t *h = buf + off;
            uint32_t n = ((uint32_t)h[0] << 24) | ((uint32_t)h[1] << 16) | ((uint32_t)h[2] << 8) | h[3];
            if (n > MAX_FRAME) {
                fprintf(stderr, "c-floor-server: frame of %u bytes exceeds 1 MiB, closing\n", n);
                bad = 1;
                break;
            }
            if (have - off < HEADER + n) break;  // incomplete frame
            if (send_all(fd, h, HEADER + n) < 0) {
                bad = 1;
                break;
            }
            off += HEADER + n;
        }
        if (bad) break;
        if (off > 0) {
            memmove(buf, buf + off, have - off);
            have -= off;
        }
    }
out:
    free(buf);
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: c-floor-server SOCKET_PATH\n");
        return 2;
    }
    g_path = argv[1];
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(g_path) >= sizeof addr.sun_path) {
        fprintf(stderr, "c-floor-server: socket path longer than %zu bytes: %s\n", sizeof addr.sun_path - 1, g_path);
        return 2;
    }
    strcpy(addr.sun_path, g_path);

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        perror("c-floor-server: socket");
        return 1;
    }
    unlink(g_path);  // a stale socket from an earlier run
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        fprintf(stderr, "c-floor-server: bind %s: %s\n", g_path, strerror(errno));
        return 1;
    }
    if (listen(lfd, 128) < 0) {
        perror("c-floor-server: listen");
        unlink(g_path);
        return 1;
    }

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
                if (errno == EMFILE || errno == ENFILE) usleep(10000);
                continue;
            }
            perror("c-floor-server: accept");
            unlink(g_path);
            return 1;
        }
        pthread_t t;
        int rc = pthread_create(&t, &attr, serve, (void *)(intptr_t)fd);
        if (rc != 0) {
            fprintf(stderr, "c-floor-server: pthread_create: %s\n", strerror(rc));
            close(fd);
        }
    }
}
