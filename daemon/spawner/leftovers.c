/*
 * tend-spawner: what a task leaves behind, once its keeper has reaped it. The keeper is a child
 * subreaper (keeper.c), so every process the task started and left (setsid'd, double-forked, moved
 * to another cgroup: an `off` task runs on the daemon's uid, which owns its task group's files) is
 * the keeper's child once its parent is gone, whatever group it is in. The daemon stops a task and
 * kills its leftovers through that tree too (daemon/spawn/keeper-tree.ts), beside the task's
 * cgroup: a tree that outlives the keeper would go to init, where nothing of the task's can be told
 * from any other process.
 *
 * So the keeper stays, reaping, while it has a child and its helper listens: the daemon, which has
 * heard the exit, kills what is left at once, or after the grace of a stop under way (a child
 * cleaning up after TERM keeps its grace). Once no helper listens (none heard the exit, or the
 * helper went: its end of the report channel hangs up), or after the longest grace, nobody else
 * will: the keeper KILLs its children again and again, as more are handed to it, until it has
 * none, for a bounded time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <sys/signalfd.h>
#include "spawner.h"

/* How often the keeper looks for a child's end or the helper's: at once at first (the daemon kills
 * what is left within milliseconds of the exit), then less and less often (a leftover the daemon
 * cannot kill, one another uid's by a setuid program, must not cost a wake-up every 10 ms). How long
 * it stays at most: past the longest grace a stop may give (an hour, protocol/limits.ts), so that it
 * never cuts one short; then it kills what is left itself. How long its own kill may take at most
 * (a process stuck in the kernel, D state, dies only once it returns). */
enum { LEFTOVER_POLL_MS = 10, LEFTOVER_POLL_MAX_MS = 1000, LEFTOVER_KILL_MAX_MS = 10000 };
#define LEFTOVER_STAY_MAX_MS (3600LL * 1000 + 60 * 1000)

int watch_children(void) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0) return -1;
  int fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) sigprocmask(SIG_UNBLOCK, &chld, NULL);
  return fd;
}

static void kill_leftovers(void) {
  long long deadline = monotonic_ms() + LEFTOVER_KILL_MAX_MS;
  /* Our unreaped child's pid is still that child: nothing but us can reap it. */
  while (reap_ended_children() && monotonic_ms() < deadline) {
    proc_signal_children(SIGKILL);
    struct timespec pause = {0, 2 * 1000000L};
    nanosleep(&pause, NULL);
  }
}

void outlive_leftovers(int report_fd, int heard) {
  long long deadline = monotonic_ms() + LEFTOVER_STAY_MAX_MS;
  int pause = LEFTOVER_POLL_MS;
  while (reap_ended_children()) {
    if (!heard || monotonic_ms() >= deadline) {
      kill_leftovers();
      return;
    }
    /* No events asked: POLLHUP (the helper gone) is always reported. */
    struct pollfd helper = {.fd = report_fd, .events = 0};
    if (poll(&helper, 1, pause) > 0 && (helper.revents & (POLLHUP | POLLERR))) heard = 0;
    if (pause < LEFTOVER_POLL_MAX_MS) pause = pause * 2 > LEFTOVER_POLL_MAX_MS ? LEFTOVER_POLL_MAX_MS : pause * 2;
  }
}
