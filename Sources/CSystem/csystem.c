#define _GNU_SOURCE
#include "csystem.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <fcntl.h>

const uint32_t RAIN_EPOLLIN = EPOLLIN;
const uint32_t RAIN_EPOLLOUT = EPOLLOUT;
const uint32_t RAIN_EPOLLERR = EPOLLERR;
const uint32_t RAIN_EPOLLHUP = EPOLLHUP;
const uint32_t RAIN_EPOLLRDHUP = EPOLLRDHUP;

int rain_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int rain_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = token;
    return epoll_ctl(epfd, op, fd, &ev);
}

int rain_epoll_wait(int epfd, rain_epoll_event *out, int max, int timeout_ms) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n = epoll_wait(epfd, evs, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        out[i].events = evs[i].events;
        out[i].token = evs[i].data.u64;
    }
    return n;
}

int rain_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int rain_accept4(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

int rain_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

int rain_socket_kind(int fd, int *domain, int *type, int *accepting) {
    socklen_t len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, domain, &len) != 0) return -1;
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, type, &len) != 0) return -1;
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, accepting, &len) != 0) return -1;
    return 0;
}

int rain_set_dumpable(int value) { return prctl(PR_SET_DUMPABLE, (unsigned long)value, 0, 0, 0); }

long rain_raise_nofile_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    }
    return (long)rl.rlim_cur;
}

int rain_release_free_memory(void) { return malloc_trim(0); }

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

const int RAIN_SO_PEERPIDFD = SO_PEERPIDFD;

int rain_peer_pidfd(int fd, int *pidfd) {
    int value = -1;
    socklen_t len = sizeof(value);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &value, &len) != 0) return -1;
    *pidfd = value;
    return 0;
}

int rain_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

long rain_readlinkat(int dirfd, const char *name, char *buffer, unsigned long size) {
    return (long)readlinkat(dirfd, name, buffer, (size_t)size);
}
