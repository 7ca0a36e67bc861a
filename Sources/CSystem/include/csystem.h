// What Glibc's Swift module does not export: epoll, eventfd, accept4, struct ucred, prctl,
// SO_DOMAIN / SO_ACCEPTCONN.
// Everything here is a thin, non-variadic wrapper so Swift can call it.
#ifndef RAIN_CSYSTEM_H
#define RAIN_CSYSTEM_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// One epoll event: the fd's readiness bits and the 64-bit token registered with it.
typedef struct rain_epoll_event {
    uint32_t events;
    uint64_t token;
} rain_epoll_event;

extern const uint32_t RAIN_EPOLLIN;
extern const uint32_t RAIN_EPOLLOUT;
extern const uint32_t RAIN_EPOLLERR;
extern const uint32_t RAIN_EPOLLHUP;
extern const uint32_t RAIN_EPOLLRDHUP;

int rain_epoll_create(void);
/// op: 1 add, 2 del, 3 mod (EPOLL_CTL_*).
int rain_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token);
/// Waits and copies up to max events into out. Returns the count, or -1 with errno.
int rain_epoll_wait(int epfd, rain_epoll_event *out, int max, int timeout_ms);

/// read(2), send(2) and epoll_wait(2) as plain system calls: glibc's own wrappers are cancellation
/// points, which switch cancellation on and off around every call (`scripts/bench --profile`);
/// nothing here cancels threads. Same results and errno.
ssize_t rain_read(int fd, void *buf, size_t n);
ssize_t rain_send(int fd, const void *buf, size_t n, int flags);

int rain_eventfd(void);
int rain_accept4(int fd);
/// Peer credentials of a Unix socket (SO_PEERCRED). Returns 0 on success.
int rain_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);
/// Asks the kernel to stamp every write on a Unix socket with its writer (`SO_PASSCRED`); set on a
/// listening socket, the sockets it accepts inherit it.
int rain_set_pass_credentials(int fd);
/// `recvmsg` of up to `n` bytes with the writer's pid (`SCM_CREDENTIALS`) in `*pid`; -1 there when
/// the kernel attached none. With `SO_PASSCRED` set the kernel never joins two writers' bytes in
/// one read.
ssize_t rain_read_with_writer(int fd, void *buf, size_t n, pid_t *pid);
/// The bytes queued for reading on a socket (`SIOCINQ`).
int rain_socket_queued_input(int fd, int *count);
/// What a descriptor is, for a socket handed over by a service manager: its address family
/// (SO_DOMAIN), socket type (SO_TYPE) and whether it listens (SO_ACCEPTCONN, 0 or 1).
/// Returns 0 on success, or -1 with errno (ENOTSOCK for a descriptor that is not a socket).
int rain_socket_kind(int fd, int *domain, int *type, int *accepting);
/// prctl(PR_SET_DUMPABLE, value).
int rain_set_dumpable(int value);
/// Names the calling thread (prctl PR_SET_NAME: the kernel keeps the first 15 bytes). 0, or -1 with errno.
int rain_set_thread_name(const char *name);
/// Raises RLIMIT_NOFILE's soft limit to its hard limit; returns the new soft limit or -1.
long rain_raise_nofile_limit(void);
/// Gives the free memory of every malloc arena back to the kernel (malloc_trim(0)).
/// Returns 1 when some was released.
int rain_release_free_memory(void);
/// mallopt(M_ARENA_MAX, count): at most `count` malloc arenas from now on. Returns 1 on success.
int rain_limit_malloc_arenas(int count);
/// sched_setscheduler(0, SCHED_BATCH or SCHED_OTHER, priority 0) for the calling thread:
/// batch = 1 gives it the batch policy (its wakeups do not preempt the running task), 0 the normal
/// one. Returns 0 on success, or -1 with errno.
int rain_set_thread_batch_scheduling(int batch);

/// SO_PEERPIDFD (Linux 6.5): a pidfd of the process at the other end of a Unix socket. Debian 12's
/// headers lack it; the value is the same on every architecture Linux has.
extern const int RAIN_SO_PEERPIDFD;
/// getsockopt(SO_PEERPIDFD): stores a new close-on-exec pidfd in *pidfd. Returns 0 on success, or
/// -1 with errno (ENOPROTOOPT on a kernel without it, ESRCH when the peer is already reaped).
int rain_peer_pidfd(int fd, int *pidfd);
/// pidfd_open(pid, 0) (Linux 5.3). Returns the pidfd (close-on-exec), or -1 with errno.
int rain_pidfd_open(pid_t pid);
/// readlinkat(dirfd, name, buffer, size) without the variadic or restrict-qualified prototype
/// getting in Swift's way. Returns the length written (no NUL), or -1 with errno.
long rain_readlinkat(int dirfd, const char *name, char *buffer, unsigned long size);
/// Starts `path` (argv and envp NULL-terminated) in a session of its own (POSIX_SPAWN_SETSID), its
/// signal mask empty and every signal at its default action, with in_fd, out_fd and err_fd as its
/// descriptors 0, 1 and 2 (err_fd < 0: /dev/null) and every other descriptor closed
/// (posix_spawn_file_actions_addclosefrom_np). Returns 0 and the pid, or an errno value.
int rain_spawn(const char *path, char *const argv[], char *const envp[], int in_fd, int out_fd, int err_fd,
               pid_t *pid);
/// pipe2(fds, O_CLOEXEC): fds[0] reads, fds[1] writes.
int rain_pipe(int fds[2]);
/// posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), grantpt, unlockpt and ptsname_r into name.
/// Returns the master descriptor, or -1 with errno.
int rain_open_pseudo_terminal(char *name, size_t size);

#ifdef __cplusplus
}
#endif
#endif
