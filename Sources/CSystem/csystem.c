#define _GNU_SOURCE
#include "csystem.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <fcntl.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <unistd.h>

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
    // epoll_pwait with no signal mask is epoll_wait, and exists on every architecture.
    int n = (int)syscall(SYS_epoll_pwait, epfd, evs, max, timeout_ms, NULL, (size_t)8);
    for (int i = 0; i < n; i++) {
        out[i].events = evs[i].events;
        out[i].token = evs[i].data.u64;
    }
    return n;
}

ssize_t rain_read(int fd, void *buf, size_t n) { return (ssize_t)syscall(SYS_read, fd, buf, n); }

ssize_t rain_send(int fd, const void *buf, size_t n, int flags) {
    return (ssize_t)syscall(SYS_sendto, fd, buf, n, flags, NULL, (socklen_t)0);
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

int rain_set_pass_credentials(int fd) {
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
}

ssize_t rain_read_with_writer(int fd, void *buf, size_t n, pid_t *pid) {
    struct iovec iov = {.iov_base = buf, .iov_len = n};
    union {
        char bytes[CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof(control.bytes);
    *pid = -1;
    ssize_t got = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (got < 0) return got;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred cred;
            memcpy(&cred, CMSG_DATA(c), sizeof(cred));
            *pid = cred.pid;
        }
    }
    return got;
}

int rain_socket_queued_input(int fd, int *count) { return ioctl(fd, SIOCINQ, count); }

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

int rain_set_thread_name(const char *name) { return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0); }

int rain_set_thread_batch_scheduling(int batch) {
    struct sched_param param = {.sched_priority = 0};
    return sched_setscheduler(0, batch ? SCHED_BATCH : SCHED_OTHER, &param);
}

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

int rain_limit_malloc_arenas(int count) { return mallopt(M_ARENA_MAX, count); }

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

/// A descriptor above 2, so the dup2 actions onto 0, 1 and 2 cannot overwrite one another.
static int rain_above_stdio(int fd, int *made) {
    *made = -1;
    if (fd < 0 || fd > 2) return fd;
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    *made = copy;
    return copy;
}

int rain_spawn(const char *path, char *const argv[], char *const envp[], int in_fd, int out_fd, int err_fd,
               pid_t *pid) {
    int made_in, made_out, made_err;
    int in = rain_above_stdio(in_fd, &made_in);
    int out = rain_above_stdio(out_fd, &made_out);
    int err = rain_above_stdio(err_fd, &made_err);
    int rc = 0;
    if (in < 0 || out < 0 || (err_fd >= 0 && err < 0)) {
        rc = errno;
        goto done;
    }
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    if ((rc = posix_spawn_file_actions_init(&actions)) != 0) goto done;
    if ((rc = posix_spawnattr_init(&attributes)) != 0) {
        posix_spawn_file_actions_destroy(&actions);
        goto done;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if ((rc = posix_spawn_file_actions_adddup2(&actions, in, 0)) == 0
        && (rc = posix_spawn_file_actions_adddup2(&actions, out, 1)) == 0
        && (rc = err >= 0 ? posix_spawn_file_actions_adddup2(&actions, err, 2)
                          : posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)) == 0
        && (rc = posix_spawn_file_actions_addclosefrom_np(&actions, 3)) == 0
        && (rc = posix_spawnattr_setsigmask(&attributes, &none)) == 0
        && (rc = posix_spawnattr_setsigdefault(&attributes, &all)) == 0
        && (rc = posix_spawnattr_setflags(
                &attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0) {
        rc = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    }
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
done:
    if (made_in >= 0) close(made_in);
    if (made_out >= 0) close(made_out);
    if (made_err >= 0) close(made_err);
    return rc;
}

int rain_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int rain_open_pseudo_terminal(char *name, size_t size) {
    int fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (grantpt(fd) != 0 || unlockpt(fd) != 0 || ptsname_r(fd, name, size) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}
