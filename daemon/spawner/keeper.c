/*
 * tend-spawner: the keeper. One per task, forked by the helper for every spawn request: it leaves
 * the daemon's session, ignores every signal that could end it but SIGKILL, keeps no descriptor of
 * the helper's but its report channel, forks the task child (child.c), tells the helper how the start
 * went, waits for the task, writes how it ended atomically into the exit file, tells the helper
 * (if one still listens) and exits. Nothing ties it to the daemon or the helper (unless the
 * task is to end with its daemon, below): a task outlives them, and a later daemon learns how it ended from the exit file (a keeper that is gone
 * has written it, unless it was SIGKILLed; one that is alive will have when it exits). A sandboxed
 * task's bubblewrap runs with --die-with-parent: its parent is the keeper, so a SIGKILLed keeper
 * takes its sandbox along.
 *
 * stdin (a request that names a FIFO): the keeper makes the FIFO (0600) and holds it open for
 * reading and writing, so the task's own open never waits and the task never reads EOF merely
 * because no daemon is writing at the moment: writers (the daemon, any daemon after it) come and
 * go. SIGUSR1 is "end of input": the keeper closes its descriptor, and the task reads EOF once
 * the pipe is drained and no writer is left. The handler is installed only once the child has
 * exec'd (a vfork child must never run a handler of the keeper's), before the keeper says so.
 *
 * A task that ends with its daemon (lifeline.c): the keeper also watches its report pipe, and when
 * the helper is gone, kills the task with everything it started and records that in the exit file;
 * so it does when the lease the daemon keeps writing into the task's folder runs out.
 *
 * A terminal task (terminal.c): the keeper also holds the task's pseudo-terminal and a resize FIFO,
 * and, instead of a plain wait, relays between them and the files until the task has ended and
 * its terminal is drained; SIGUSR1 stays ignored (a terminal's end of input is typed into it).
 *
 * Its report pipe's lines (keeper -> helper) and the exit file's line: PROTOCOL.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spawner.h"

extern char **environ;

/* Seconds between attempts at an exit file the disk refused; about a minute in all. */
static const unsigned retry_delays[] = {1, 2, 4, 8, 15, 15, 15};
/* When no helper heard the exit: ~60 s as above, then every 15 s, ~30 min in all. */
#define UNHEARD_ATTEMPTS 120

/* Writes one line to the helper; 1 when it went into the pipe (a helper is there to read it). */
static int say(int fd, const char *text, int length) {
  if (length <= 0) return 0;
  ssize_t n;
  do n = write(fd, text, (size_t)length);
  while (n < 0 && errno == EINTR);
  return n == length;
}

/* Every signal whose default would end the keeper, but the faults (SEGV, BUS, ...) and SIGKILL. */
static void ignore_signals(void) {
  static const int ignored[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGIO, SIGPWR, SIGSTKFLT};
  struct sigaction ignore;
  memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) sigaction(ignored[i], &ignore, NULL);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++) sigaction(sig, &ignore, NULL);
}

/* The keeper's descriptor of the stdin FIFO (-1: none, or closed by SIGUSR1). */
static volatile sig_atomic_t stdin_holder = -1;

static void end_stdin(int signal_number) {
  (void)signal_number;
  int saved = errno;
  if (stdin_holder >= 0) close(stdin_holder);
  stdin_holder = -1;
  errno = saved;
}

static void handle_end_of_input(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = end_stdin;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGUSR1, &action, NULL);
}

/* ------------------------------------------------------------ exit file */

static int retryable(int error) {
  return error == ENOSPC || error == EDQUOT || error == EROFS || error == EIO || error == ENOMEM || error == EAGAIN || error == EINTR || error == EMFILE || error == ENFILE;
}

static int write_all(int fd, const char *text, size_t length, int durable) {
  for (size_t done = 0; done < length;) {
    ssize_t n = write(fd, text + done, length - done);
    if (n > 0) done += (size_t)n;
    else if (n == 0) return EIO;
    else if (errno != EINTR) return errno;
  }
  while (durable && fsync(fd) != 0)
    if (errno != EINTR) return errno;
  return 0;
}

/* A folder a task put at the exit file's name (which no unlink removes, and no rename or link
 * replaces) is moved aside, under a name it cannot guess (removed with the task's folder), so that
 * the exit is still recorded. 0 or the errno. */
static int move_aside(int dir_fd, const char *name) {
  unsigned char bytes[8];
  ssize_t got;
  do got = getrandom(bytes, sizeof bytes, 0);
  while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof bytes) return got < 0 ? errno : EIO;
  char aside[300];
  int length = snprintf(aside, sizeof aside, "%s.%02x%02x%02x%02x%02x%02x%02x%02x.displaced", name, bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]);
  if (length < 0 || (size_t)length >= sizeof aside) return ENAMETOOLONG;
  return renameat(dir_fd, name, dir_fd, aside) == 0 ? 0 : errno;
}

/* Whatever is at `name` goes: a file or link unlinked, a folder moved aside. 0 or the errno. */
static int clear_name(int dir_fd, const char *name) {
  if (unlinkat(dir_fd, name, 0) == 0) return 0;
  return errno == EISDIR ? move_aside(dir_fd, name) : errno;
}

/* Where the filesystem has no O_TMPFILE: a temporary file beside it (O_EXCL, 0600), written
 * whole, fsynced and renamed over the exit file. */
static int write_renamed(int dir_fd, const char *name, const char *text, size_t length, int durable) {
  char temporary[300];
  snprintf(temporary, sizeof temporary, "%s.%d.tmp", name, (int)getpid());
  int fd;
  do fd = openat(dir_fd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno == EEXIST) {
    /* Left by a keeper that was killed with this pid, long ago: ours to replace. */
    unlinkat(dir_fd, temporary, 0);
    fd = openat(dir_fd, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  }
  if (fd < 0) return errno;
  int error = write_all(fd, text, length, durable);
  if (close(fd) != 0 && !error && errno != EINTR) error = errno;
  if (!error && renameat(dir_fd, temporary, dir_fd, name) != 0) {
    error = errno;
    if ((error == EISDIR || error == ENOTEMPTY || error == EEXIST) && move_aside(dir_fd, name) == 0) error = renameat(dir_fd, temporary, dir_fd, name) != 0 ? errno : 0;
  }
  if (error) unlinkat(dir_fd, temporary, 0);
  return error;
}

/*
 * One attempt; 0 or the errno, and no temporary file left behind. The file is written whole (and
 * fsynced, when durable) before it has a name: an unnamed file in the folder (O_TMPFILE, 0600),
 * then linked in as the exit file, so a reader never sees part of it, and a folder being removed
 * meanwhile (the task ended, was reported, and removed in the same millisecond) never shows a
 * temporary file and gets no exit file (the link fails: ENOENT). Then, when durable, the folder is
 * fsynced.
 */
static int write_exit_file_once(int dir_fd, const char *name, const char *text, size_t length, int durable) {
  int fd;
  do fd = openat(dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  while (fd < 0 && errno == EINTR);
  int error = 0;
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    error = write_renamed(dir_fd, name, text, length, durable);
  } else if (fd < 0) {
    return errno;
  } else {
    error = write_all(fd, text, length, durable);
    if (!error) {
      char path[40];
      snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
      if (linkat(AT_FDCWD, path, dir_fd, name, AT_SYMLINK_FOLLOW) != 0) {
        error = errno;
        /* Left by a keeper of this very task that was killed? Never: one keeper per task. Still,
         * whatever is there is older than this exit. */
        if (error == EEXIST && clear_name(dir_fd, name) == 0) error = linkat(AT_FDCWD, path, dir_fd, name, AT_SYMLINK_FOLLOW) != 0 ? errno : 0;
      }
    }
    close(fd);
  }
  if (error) return error;
  while (durable && fsync(dir_fd) != 0)
    if (errno != EINTR) return errno; /* the next attempt writes it again */
  return 0;
}

/* Fsyncs an exit file written without, then its folder; 0 or the errno. */
static int make_durable(int dir_fd, const char *name) {
  /* By name: the task (under `off`) may have put anything there since the link. */
  int fd = open_regular(dir_fd, name, O_RDONLY, 0);
  if (fd < 0) return errno;
  int error = 0;
  while (fsync(fd) != 0)
    if (errno != EINTR) {
      error = errno;
      break;
    }
  close(fd);
  while (!error && fsync(dir_fd) != 0)
    if (errno != EINTR) error = errno;
  return error;
}

static void sleep_seconds(unsigned seconds) {
  struct timespec left = {(time_t)seconds, 0};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

__attribute__((noreturn)) static void keeper_fail(int report_fd, const char *stage, int error) {
  char message[64];
  say(report_fd, message, snprintf(message, sizeof message, "f %s %d\n", stage, error));
  _exit(0);
}

/* ----------------------------------------------------------- a terminal */

/*
 * A terminal task's side of the keeper, before the fork: the resize FIFO, the terminal, the output
 * file (the keeper writes it, not the task). The terminal's other side goes to the keeper's own
 * fd 0, which is how the child gets it: the child keeps its stdio when it closes everything of
 * the keeper's (child.c).
 */
static void open_relay(struct request *r, struct relay *relay, int report_fd) {
  if ((relay->resize = hold_fifo(r->resize_fifo)) < 0) keeper_fail(report_fd, "tty", errno);
  int terminal = -1;
  if ((relay->master = open_terminal(r->cols, r->rows, &terminal)) < 0) keeper_fail(report_fd, "tty", errno);
  /* Another user's task owns its terminal, as a login would (it can then reopen it, chmod it). */
  if (r->set_user && fchown(terminal, (uid_t)r->uid, (gid_t)r->gid) != 0) keeper_fail(report_fd, "tty", errno);
  if ((relay->output = open_regular(AT_FDCWD, r->output, O_WRONLY | O_APPEND | O_CREAT, 0600)) < 0) keeper_fail(report_fd, "output", errno);
  if (dup2(terminal, 0) < 0) keeper_fail(report_fd, "tty", errno);
  close(terminal);
}

/*
 * Once the child has exec'd: the keeper lets go of the terminal's other side (fd 0 back on
 * /dev/null), so that it reads EIO once the task's processes have all let go of it. The output
 * file gets the task's file size limit: the copy stops where the task's own writes would.
 */
static void let_go_of_terminal(unsigned long long file_size) {
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    dup2(null_fd, 0);
    if (null_fd != 0) close(null_fd);
  } else {
    close(0);
  }
  struct rlimit limit = {(rlim_t)file_size, (rlim_t)file_size};
  setrlimit(RLIMIT_FSIZE, &limit);
}

/* ----------------------------------------------------------- the keeper */

/*
 * The task child, by vfork: copying even the keeper's small page tables costs ~0.2 ms on this kind
 * of machine, and the keeper has nothing to do until the child has exec'd anyway. Until its exec
 * (or _exit) the child runs on the keeper's memory, below this frame: run_child never returns,
 * writes nothing of the keeper's that the keeper still uses (its own locals, the request's fd table,
 * child.c's error_fd, environ), allocates nothing, and handles no signal (it resets them all to
 * SIG_DFL; the keeper's are SIG_IGN). Credentials, limits, session, cwd and descriptors are its
 * own: vfork shares only the memory.
 */
__attribute__((noinline)) static pid_t start_child(struct request *r, int error_pipe, int highest) {
  char **own_environ = environ;
  pid_t pid = vfork();
  if (pid == 0) run_child(r, error_pipe, highest);
  int error = errno;
  environ = own_environ; /* the child pointed it at the task's (execvpe reads it) */
  errno = error;
  return pid;
}

/* The last bytes of what a program that never said it was set up wrote first (bubblewrap's
 * complaint), passed on in hex: its `f` line stays one read of the helper's (PROTOCOL.md). */
#define SETUP_WORDS_KEPT 200

/*
 * Reads the setup channel until SETUP_DONE_LINE (1), or its end without it (0): every process that
 * held it (bubblewrap, its sandbox, the prelude) is gone, and nothing of the task ran; or until
 * wait_ms have passed (-1: a setup that hangs, on a file system that does not answer, say). words
 * gets the last SETUP_WORDS_KEPT bytes said. The line counts only as a line of its own (bubblewrap
 * may name a path that holds it), searched for across reads: a write may be cut.
 */
static int wait_for_setup(int fd, unsigned long long wait_ms, char *words, size_t *words_length) {
  /* A newline before the line, and one standing for the channel's start. */
  static const char done[] = "\n" SETUP_DONE_LINE;
  const size_t line_length = sizeof done - 1;
  char buffer[4 * SETUP_WORDS_KEPT];
  buffer[0] = '\n';
  size_t used = 1;
  int outcome = 0;
  long long deadline = monotonic_ms() + (long long)wait_ms;
  for (;;) {
    if (used == sizeof buffer) {
      memmove(buffer, buffer + used - SETUP_WORDS_KEPT, SETUP_WORDS_KEPT);
      used = SETUP_WORDS_KEPT;
    }
    long long left = deadline - monotonic_ms();
    struct pollfd channel = {.fd = fd, .events = POLLIN};
    int ready = left > 0 ? poll(&channel, 1, left > INT_MAX ? INT_MAX : (int)left) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      outcome = -1;
      break;
    }
    ssize_t n = read(fd, buffer + used, sizeof buffer - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size_t from = used >= line_length ? used - (line_length - 1) : 0;
    used += (size_t)n;
    if (memmem(buffer + from, used - from, done, line_length)) return 1;
  }
  size_t start = used > SETUP_WORDS_KEPT ? used - SETUP_WORDS_KEPT : 0;
  memcpy(words, buffer + start, used - start);
  *words_length = used - start;
  return outcome;
}

/* "f setup <errno> <code> <signal>[ <hex of the words>]": how the program ended (EIO), or that it
 * was killed for taking too long (ETIMEDOUT), and what it said. */
static void report_setup_failure(int report_fd, int error, int status, const char *words, size_t length) {
  static const char digits[] = "0123456789abcdef";
  char line[64 + 2 * SETUP_WORDS_KEPT];
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  int signal_number = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  int at = snprintf(line, sizeof line, "f setup %d %d %d%s", error, code, signal_number, length ? " " : "");
  for (size_t i = 0; i < length; i++) {
    line[at++] = digits[(unsigned char)words[i] >> 4];
    line[at++] = digits[(unsigned char)words[i] & 15];
  }
  line[at++] = '\n';
  say(report_fd, line, at);
}

__attribute__((noreturn)) void run_keeper(struct request *r, int report_fd, int highest_known) {
  /* Nothing of the helper's but the report pipe and the user namespaces its child mounts with (not
   * the daemon's pipes, not the signalfd, not the pipes of the other keepers); stdio on /dev/null. */
  if (report_fd < 3) {
    int moved = fcntl(report_fd, F_DUPFD_CLOEXEC, 3);
    if (moved >= 0) report_fd = moved;
  }
  close_except(0, report_fd, r->userns_fds, r->usernsc, highest_known);
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    for (int fd = 0; fd < 3; fd++)
      if (fd != null_fd) dup2(null_fd, fd);
    if (null_fd > 2) close(null_fd);
  }

  /* Out of the daemon's session and process group: no terminal hangup, no group kill reaches it. */
  if (setsid() < 0) keeper_fail(report_fd, "setsid", errno);
  ignore_signals();
  prctl(PR_SET_NAME, "tend-keeper", 0L, 0L, 0L);

  /* The exit file's folder (held open: a folder removed meanwhile is never made again) and our
   * start time, while the request is at hand. */
  char name[256] = "";
  int dir_fd = -1;
  if (*r->exit_file) {
    char *path = (char *)r->exit_file; /* points into the payload, which is ours to write */
    char *slash = strrchr(path, '/');
    size_t name_length = slash ? strlen(slash + 1) : 0;
    if (name_length > 0 && name_length < sizeof name) {
      memcpy(name, slash + 1, name_length + 1);
      *slash = 0;
      do dir_fd = open(slash == path ? "/" : path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      while (dir_fd < 0 && errno == EINTR);
      *slash = '/';
    }
  }
  unsigned long long start = 0;
  proc_start_time(getpid(), &start);

  int holder = -1;
  if (*r->stdin_fifo && (holder = hold_fifo(r->stdin_fifo)) < 0) keeper_fail(report_fd, "stdin", errno);
  int tty = r->tty;
  struct lifeline lifeline = {.fd = -1, .children = -1};
  struct lifeline *watched = NULL;
  /* A terminal's keeper: a signalfd for SIGCHLD, so that the relay reaps the orphans it adopts as
   * they end (terminal.c); -1: none (then it adopts none). */
  int orphans = -1;
  if (r->lifeline) {
    if (lifeline_begin(&lifeline, report_fd, dir_fd) != 0) keeper_fail(report_fd, "lifeline", errno);
    watched = &lifeline;
  } else if (!r->tty || (orphans = watch_children()) >= 0) {
    /* The task's orphans come to the keeper, which reaps them, so what they used is counted
     * (usage.c), and they stay below it, whatever cgroup they move to, until the daemon has killed
     * them (leftovers.c); should the kernel refuse, they are left out of the figures and the tree. */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L);
  }
  struct relay relay = {.master = -1, .output = -1, .input = holder, .resize = -1};
  if (tty) open_relay(r, &relay, report_fd);
  else stdin_holder = holder;
  /* Held open read-only for the task's whole life, and never read: while another description of the
   * output file is open, the kernel grants no write lease on it (F_SETLEASE: EAGAIN), so the task
   * cannot make every reader of its output wait out a lease break (45 s a read). */
  int output_reader = open_regular(AT_FDCWD, r->output, O_RDONLY | O_CREAT, 0600);
  if (output_reader < 0) keeper_fail(report_fd, "output", errno);
  unsigned long long file_size = r->file_size;

  /* The child's error channel: a socket pair, like the report channel, so that no process of the
   * keeper's uid can open it again through /proc to hold it open or write an error for the child. */
  int pipe_fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pipe_fds) != 0) keeper_fail(report_fd, "fork", errno);
  /* The setup channel, a socket pair too: its line must come from the program, never from a
   * process that opened it again. Its read end is held (never read again) until the task ends, so
   * that bubblewrap's later words on its fd 2 never meet a broken pipe. */
  int setup_fds[2] = {-1, -1};
  if (r->reports_setup && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, setup_fds) != 0) keeper_fail(report_fd, "fork", errno);
  r->setup_fd = setup_fds[1];
  unsigned long long setup_wait_ms = r->setup_wait_ms;
  int highest = highest_known;
  int ours[] = {pipe_fds[0], pipe_fds[1], setup_fds[0], setup_fds[1], report_fd, dir_fd, holder, relay.master, relay.output, relay.resize, lifeline.children, output_reader, orphans};
  for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
    if (ours[i] > highest) highest = ours[i];
  pid_t task = start_child(r, pipe_fds[1], highest);
  int fork_error = errno;
  close(pipe_fds[1]);
  if (setup_fds[1] >= 0) close(setup_fds[1]);
  /* The child has made its idmapped mounts (or failed): the helper's user namespaces are no longer needed. */
  for (size_t i = 0; i < r->usernsc; i++) close(r->userns_fds[i]);
  if (task < 0) keeper_fail(report_fd, "fork", fork_error);
  lifeline.task = task;

  /* The child has exec'd or failed: the request (in the helper's buffers) is no longer needed. */
  r = NULL;
  release_helper_memory();
  if (chdir("/") != 0) {
    /* Only holds the helper's cwd busy: nothing to report. */
  }

  /* The child's verdict: EOF with nothing said means it exec'd. */
  char said[64];
  ssize_t total = 0;
  for (;;) {
    ssize_t n = read(pipe_fds[0], said + total, sizeof said - 1 - (size_t)total);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    total += n;
    if (total == (ssize_t)sizeof said - 1) break;
  }
  close(pipe_fds[0]);
  char line[96];
  if (total > 0) {
    /* "<stage> <errno>[ <index>]": passed on, minus anything odd. */
    size_t used = 0;
    for (ssize_t i = 0; i < total && used < sizeof said - 1; i++) {
      char c = said[i];
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ' ') said[used++] = c;
    }
    said[used] = 0;
    while (waitpid(task, NULL, 0) < 0 && errno == EINTR) {
    }
    say(report_fd, line, snprintf(line, sizeof line, "f %s\n", used ? said : "exec 5"));
    _exit(0);
  }
  /* A program that reports its setup (bubblewrap, whose mounts by path may fail as the task
   * starts) has started the task only once it says so; ended before, it ran nothing of the task. */
  char words[SETUP_WORDS_KEPT];
  size_t words_length = 0;
  int set_up = setup_fds[0] < 0 ? 1 : wait_for_setup(setup_fds[0], setup_wait_ms, words, &words_length);
  if (set_up <= 0) {
    /* Its whole group (the child began a session): bubblewrap, and its sandbox, which dies with it. */
    if (set_up < 0 && kill(-task, SIGKILL) != 0) kill(task, SIGKILL);
    int setup_status = 0;
    while (waitpid(task, &setup_status, 0) < 0 && errno == EINTR) {
    }
    report_setup_failure(report_fd, set_up < 0 ? ETIMEDOUT : EIO, setup_status, words, words_length);
    _exit(0);
  }
  if (holder >= 0 && !tty) handle_end_of_input();
  if (tty) let_go_of_terminal(file_size);
  say(report_fd, line, snprintf(line, sizeof line, "s %d %llu\n", (int)task, start));

  int status;
  if (tty) status = relay_terminal(&relay, task, watched, orphans);
  else if (watched) status = lifeline_wait(watched);
  else
    for (;;) {
      /* Any child: the task's orphans, which end meanwhile, are reaped as they go. */
      int reaped_status;
      pid_t reaped = waitpid(-1, &reaped_status, 0);
      if (reaped == task) {
        status = reaped_status;
        break;
      }
      if (reaped < 0 && errno != EINTR) _exit(1); /* cannot happen: the task is our child */
    }
  if (lifeline.ending) lifeline_end_tree(&lifeline);
  reap_sandbox_inits();
  reap_dying_children();
  /* The task is gone: nothing is left to keep a write lease off its output. Let go of the file
   * now, not after the exit file's retries: on a full disk an `rm` of the task must free its
   * output's blocks at once, not a minute later. */
  close(output_reader);
  if (setup_fds[0] >= 0) close(setup_fds[0]);
  if (tty) close(relay.output);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  long long ended_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  int signal_number = WIFSIGNALED(status) ? WTERMSIG(status) : 0;

  unsigned long long lost = tty ? output_lost_bytes() : 0;
  /* The exit file's one fixed line (PROTOCOL.md, "Exit file"): every field always there, in this order. */
  char text[512], code_text[16], signal_text[16], used[256];
  if (code >= 0) snprintf(code_text, sizeof code_text, "%d", code);
  else strcpy(code_text, "null");
  if (signal_number > 0) snprintf(signal_text, sizeof signal_text, "%d", signal_number);
  else strcpy(signal_text, "null");
  const char *ended_by = lifeline.lease_ran_out ? "lease" : lifeline.broke ? "lifeline" : "itself";
  if (usage_fields(used, sizeof used) < 0) used[0] = 0;
  int length = snprintf(text, sizeof text, "{\"v\":2,\"pid\":%d,\"exitCode\":%s,\"signal\":%s,\"endedAtMs\":%lld,\"endedBy\":\"%s\",\"outputLostBytes\":%llu%s}\n", (int)task, code_text, signal_text, ended_ms, ended_by, lost, used);
  int exited_length = snprintf(line, sizeof line, "x %d %d%s%s\n", code, signal_number, ended_by_word(lifeline.lease_ran_out ? ENDED_BY_LEASE : ENDED_BY_ITSELF), lost_word(lost));

  if (dir_fd < 0) {
    outlive_leftovers(report_fd, say(report_fd, line, exited_length));
    _exit(0);
  }
  /* The file is written before the helper hears of the exit, without fsync (~0.1 ms): once the
   * exit is reported nothing of the keeper's writes into the task's folder, so the daemon records
   * the end at once (no waiting for the file) and an `rm` right after `wait` races nothing. A
   * first write that fails (a full disk) never delays the report: it is retried after it.
   *
   * The file is made durable (fsynced, and its folder) when no helper took the line: it is then
   * the only record of the exit, and must survive a power loss. When one did, the daemon records
   * the exit itself (durably) within milliseconds, and the file is its stand-in only should the
   * daemon die before that: a file in the page cache survives a process's death, and the fsyncs,
   * ~0.4 ms of CPU per task on this kind of machine, would cost every task for a window of a few
   * milliseconds that only a power loss could hit (the task would then read `lost`). */
  int error = write_exit_file_once(dir_fd, name, text, (size_t)length, 0);
  int durable = !say(report_fd, line, exited_length);
  /* What the task left behind stays below the keeper until the daemon has killed it (leftovers.c). */
  outlive_leftovers(report_fd, !durable);
  if (!error && durable) error = make_durable(dir_fd, name);
  /* No helper took the line: the file is the only way the ending reaches a daemon, and the next one
   * (which may come minutes later) gives up its spool reserve to make room for it once it finds the
   * task ended and its keeper still here (unanswered-exit.ts). Until then the keeper keeps trying. */
  size_t attempts = durable ? UNHEARD_ATTEMPTS : sizeof retry_delays / sizeof retry_delays[0];
  for (size_t attempt = 0; error && retryable(error) && attempt < attempts; attempt++) {
    size_t last = sizeof retry_delays / sizeof retry_delays[0] - 1;
    sleep_seconds(retry_delays[attempt < last ? attempt : last]);
    error = write_exit_file_once(dir_fd, name, text, (size_t)length, durable);
  }
  _exit(error ? 1 : 0);
}

/* ------------------------------------------------------ the helper's words */

const char *lost_word(unsigned long long lost) {
  static char word[32];
  if (!lost) return "";
  snprintf(word, sizeof word, " lost=%llu", lost);
  return word;
}

const char *ended_by_word(int ended_by) {
  return ended_by == ENDED_BY_LIFELINE ? " lifeline" : ended_by == ENDED_BY_LEASE ? " lease" : "";
}
