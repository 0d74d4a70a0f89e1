/*
 * tend-spawner: what a task used, as its keeper knows it once the task is reaped (the exit file's
 * figures, PROTOCOL.md "Exit file"). The kernel sums into the keeper's RUSAGE_CHILDREN every child
 * the keeper has waited for, and into each of those every descendant it waited for in turn: a
 * keeper that is a child subreaper gets the task's orphans as children, so those that have ended
 * are reaped here and counted too. ru_maxrss is the largest single process's peak, not the tree's.
 * ru_inblock and ru_oublock count 512-byte blocks the tree read from and wrote to storage (a write
 * is counted when the page cache takes it; reads served from the cache are not counted).
 *
 * A sandboxed task's keeper reaps bubblewrap, which exits as soon as its init (pid 1 of the task's
 * pid namespace) says how the command ended, before that init has been reaped: the init, which
 * reaped every process of the sandbox and so carries their figures, comes to the keeper (a
 * subreaper) a moment later, and is waited for here, for a bounded time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include "spawner.h"

int reap_ended_children(void) {
  for (;;) {
    pid_t pid = waitpid(-1, NULL, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return pid == 0;
  }
}

/* How long the keeper waits for a sandbox's init to end, at most, and how often it looks. */
enum { SANDBOX_INIT_WAIT_MS = 1000, SANDBOX_INIT_POLL_MS = 2, MAX_WAITED = 16 };

/* Whether the child `pid` is outside the keeper's pid namespace, or already on its way out (its
 * namespace no longer readable): either way one that ends on its own, soon. */
static int leaving_or_elsewhere(pid_t pid, const char *own_namespace) {
  char path[64], namespace[64];
  snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
  ssize_t n = readlink(path, namespace, sizeof namespace - 1);
  if (n < 0) return 1;
  namespace[n] = 0;
  return strcmp(namespace, own_namespace) != 0;
}

/* The keeper's children that are a sandbox's init (see above), at most `max`; answers how many. */
static size_t sandbox_inits(pid_t *found, size_t max) {
  char own[64], path[64], text[1024];
  ssize_t own_length = readlink("/proc/self/ns/pid", own, sizeof own - 1);
  if (own_length < 0) return 0;
  own[own_length] = 0;
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  int fd;
  do fd = open(path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return 0;
  ssize_t length;
  do length = read(fd, text, sizeof text - 1);
  while (length < 0 && errno == EINTR);
  close(fd);
  if (length <= 0) return 0;
  text[length] = 0;
  size_t count = 0;
  for (char *at = text; *at && count < max;) {
    long pid = 0;
    while (*at >= '0' && *at <= '9' && pid < 0x7fffffffL) pid = pid * 10 + (*at++ - '0');
    while (*at && (*at < '0' || *at > '9')) at++;
    if (pid > 0 && leaving_or_elsewhere((pid_t)pid, own)) found[count++] = (pid_t)pid;
  }
  return count;
}

void reap_sandbox_inits(void) {
  pid_t waited[MAX_WAITED];
  size_t count = sandbox_inits(waited, MAX_WAITED);
  long long deadline = monotonic_ms() + SANDBOX_INIT_WAIT_MS;
  for (size_t i = 0; i < count; i++) {
    for (;;) {
      pid_t pid = waitpid(waited[i], NULL, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid != 0 || monotonic_ms() >= deadline) break;
      struct timespec pause = {0, SANDBOX_INIT_POLL_MS * 1000000L};
      nanosleep(&pause, NULL);
    }
  }
}

/*
 * A task stopped with the rest of its tree (a kill, a timeout, its output cap; a leader that exits
 * by itself while its children are being stopped): the daemon signals the whole tree at once, yet
 * the leader, reaped first, can end before its children do, and those are the keeper's children
 * (a subreaper) only until the keeper has exited. So the keeper waits, for a bounded time, for its
 * children that the kernel says are dying (proc_dying: exiting, or with SIGKILL pending) and reaps
 * them, so what they used is counted. A child that is not dying is not waited for: the end of a
 * leader that exits while its children run on is recorded at once (the daemon stops them after).
 */
enum { DYING_WAIT_MS = 2000, DYING_POLL_MS = 2 };

static void note_dying(pid_t pid, void *context) {
  if (!*(int *)context && proc_dying(pid)) *(int *)context = 1;
}

void reap_dying_children(void) {
  long long deadline = monotonic_ms() + DYING_WAIT_MS;
  for (;;) {
    reap_ended_children();
    int dying = 0;
    proc_each_child(note_dying, &dying);
    if (!dying || monotonic_ms() >= deadline) return;
    struct timespec pause = {0, DYING_POLL_MS * 1000000L};
    nanosleep(&pause, NULL);
  }
}

static unsigned long long milliseconds(struct timeval time) {
  if (time.tv_sec < 0 || time.tv_usec < 0) return 0;
  return (unsigned long long)time.tv_sec * 1000ull + (unsigned long long)time.tv_usec / 1000ull;
}

static unsigned long long positive(long value) {
  return value > 0 ? (unsigned long long)value : 0;
}

int usage_fields(char *text, size_t size) {
  struct rusage used;
  if (getrusage(RUSAGE_CHILDREN, &used) != 0) used = (struct rusage){0};
  return snprintf(text, size, ",\"cpuUserMs\":%llu,\"cpuSystemMs\":%llu,\"peakMemoryBytes\":%llu,\"readBytes\":%llu,\"writeBytes\":%llu",
                  milliseconds(used.ru_utime), milliseconds(used.ru_stime), positive(used.ru_maxrss) * 1024ull, positive(used.ru_inblock) * 512ull,
                  positive(used.ru_oublock) * 512ull);
}
