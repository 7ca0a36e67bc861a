/* The durability floor of scripts/bench-signing: appends of one audit-sized record (256 bytes),
 * each followed by fdatasync, per second, on the file system of the directory given (the daemon's
 * state directory). Prints one JSON line: {"syncs":N,"seconds":S,"perSecond":R}. Asserts nothing.
 * Not rainwallet-authority-bench's floor: that one rewrites one block in place, as SQLite's pages
 * are, which syncs no metadata; the audit log appends, and every append grows the file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: c-fdatasync DIR [SECONDS]\n"); return 64; }
  double seconds = argc > 2 ? atof(argv[2]) : 3.0;
  char path[4096];
  snprintf(path, sizeof path, "%s/fdatasync-floor.log", argv[1]);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
  if (fd < 0) { perror(path); return 1; }
  char record[256];
  memset(record, 'a', sizeof record);
  record[sizeof record - 1] = '\n';
  long count = 0;
  double start = now(), end = start + seconds, t = start;
  while (t < end) {
    if (write(fd, record, sizeof record) != (ssize_t)sizeof record || fdatasync(fd) != 0) { perror("write"); return 1; }
    count++;
    t = now();
  }
  close(fd);
  unlink(path);
  printf("{\"syncs\":%ld,\"seconds\":%.3f,\"perSecond\":%.1f}\n", count, t - start, count / (t - start));
  return 0;
}
