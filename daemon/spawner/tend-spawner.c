/*
 * tend-spawner: the daemon's native spawner. A tiny long-lived helper that the daemon starts once
 * (see daemon/native-spawner.ts) and sends requests to over its stdin. For every task it forks a
 * keeper (keeper.c) from its own small address space (cheap, unlike forking the ~100 MiB daemon);
 * the keeper forks the task child (child.c), becomes its parent, relays how the start went, and
 * outlives the helper and the daemon (unless its task is to end with them: lifeline.c): when the
 * task ends it tells the helper if one still listens, writes the exit status into the task's exit
 * file, and exits. The helper reaps its keepers and reports on stdout; a later helper can attach to
 * a keeper it did not fork (a pidfd). Single-threaded: poll() on stdin, on a signalfd for SIGCHLD,
 * on every keeper's report pipe and on the pidfd of every keeper it attached to.
 *
 * Usage: tend-spawner [<parent-pid>]   (with the pid, the helper exits at once if its parent is
 * already gone; in any case it gets SIGKILL when its parent dies. Its keepers do not.)
 *
 * Wire protocol
 * -------------
 * Requests (stdin): a 4-byte little-endian payload length, then the payload, a sequence of
 * NUL-terminated strings. The first string says what it is:
 *   spawn, reqid, exitFile, file, cwd, outputFile, openFiles, fileSizeBytes, cwdDev, cwdIno, uid,
 *     gid, argc, argv[0..argc-1], envc, env[...] ("K=V"), extrac, extraFiles[...], cgc, then cgc
 *     quadruples (path, dev, ino, uid: a cgroup folder as the daemon made it), pinc, then pinc
 *     quintuples (path, dev, ino, ownerUid, ownerGid: a pinned folder), viewc, then viewc quintuples
 *     (the same: a view), hiddenc, then hiddenc absolute paths (places hidden from the task, see
 *     Hidden places below), datac, then datac blobs, each a length string and then exactly that
 *     many raw bytes (no NUL), then, optionally (left out: none), coverc and coverc covered files,
 *     each a path and then a blob (see Hidden places below), then, optionally (left out: none; it
 *     needs coverc before it), netns, dev, ino: the network namespace the child joins (child.c,
 *     join_network), only if the path opens that very namespace.
 *   spawn-stdin, reqid, exitFile, stdinFifo, then as spawn from file on: stdin is a FIFO (below).
 *   spawn-tty, reqid, exitFile, stdinFifo, resizeFifo, cols, rows, then as spawn from file on: the
 *     task runs on a pseudo-terminal its keeper holds (terminal.c); cols and rows 1..65535.
 *   spawn+lifeline, spawn-stdin+lifeline, spawn-tty+lifeline: as those, and the task ends with the
 *     helper, so with the daemon (see Keeper below, and lifeline.c).
 *   attach, reqid, keeperPid, keeperStart, taskPid, exitFile
 *   ping, reqid                          answered with `pong <reqid>` at once
 *   anything else: a spawn in the first format, without the kind and without exitFile (the first
 *     string is then the reqid: reqid, file, cwd, ...); its keeper writes no exit file.
 * Numbers are decimal. cwdDev and cwdIno are both empty (do not check cwd's identity) or both
 * given; uid and gid likewise (empty: keep the helper's user); a pinned folder's ownerUid and
 * ownerGid likewise (empty: bound as it is; given: idmapped, see Identity below, which needs uid and
 * gid: ownerUid is the folder's owner as pinned, ownerGid the group mapped with it, the owner's
 * primary group as the daemon found it, not the folder's group), and a view's are always given. reqid is 1..63 printable
 * characters without spaces. exitFile is empty (none) or an absolute path of at most 4000 bytes
 * whose last component is at most 255; stdinFifo and resizeFifo likewise, never empty. At most 1024 extra files, blobs and pinned folders together,
 * and 1024 views.
 *
 * Replies (stdout), one line each, space-separated:
 *   started <reqid> <taskpid> <keeperpid> <keeperstart>
 *                                            the child has exec'd. keeperstart is field 22 of
 *                                            /proc/<keeperpid>/stat (start time in clock ticks
 *                                            after boot): with keeperpid, what an attach needs.
 *   failed <reqid> <stage> <errno> [<index>] nothing is left running; stage is one of output,
 *                                            stdin, tty, lifeline, extra, data, pinned, idmap, hidden,
 *                                            cgroup, limits, setsid, chdir, user, keyring, exec, fork.
 *                                            For the stages extra, data, pinned, idmap, hidden and
 *                                            cgroup a 5th field gives the 0-based index of the entry
 *                                            that failed (in extraFiles, the blobs, the pinned folders
 *                                            and then the views, the hidden paths, the cgroup folders),
 *                                            so the daemon can name it; idmap (or, without mapped
 *                                            folders, hidden) without one: the child's mount
 *                                            namespace. A pinned
 *                                            folder or view that is no longer the same directory (or,
 *                                            mapped, has another owner), a cgroup folder that is no
 *                                            longer the same (or has another owner), or a cwd that is
 *                                            not, reads ESTALE.
 *                                            Stage keeper (errno ECHILD): the keeper was killed
 *                                            before it reported; its task may have started.
 *   attached <reqid>                         the keeper is alive and watched (or its exit file
 *                                            is already there: its `exited` follows at once)
 *   failed <reqid> attach <errno>            ESRCH: no such keeper (gone, exited and not reaped
 *                                            yet, or its pid is another process's now: its start
 *                                            time differs); the exit
 *                                            file, if any, is the daemon's to read. ENOSYS: no
 *                                            pidfd_open (Linux < 5.3).
 *   exited <taskpid> <code> <signal> [lifeline|lease] [lost=<n>]
 *                                            code is -1 when a signal ended it, signal 0 when it
 *                                            exited. Code -2 with signal 0: unknown (the keeper
 *                                            was killed, or its exit file is missing or invalid).
 *                                            A 5th field `lifeline`: its exit file says the task
 *                                            was ended because an earlier helper was gone;
 *                                            `lease`: its keeper ended it because the lease the
 *                                            daemon wrote in its folder ran out (lifeline.c).
 *                                            `lost=<n>` (last): n bytes of a terminal task's
 *                                            output the disk refused (terminal.c).
 *                                            Always after the `started` or `attached` of that
 *                                            task; the exits of children that failed are never
 *                                            reported.
 *   pong <reqid>                             the answer to `ping, reqid` (a request of its own):
 *                                            the helper's loop runs.
 *   error <message>                          malformed request; the helper then exits 2.
 * On stdin EOF the helper reports the spawns it already forked, then exits 0 without touching its
 * keepers or their tasks (but a lifeline task's keeper ends its task once the helper is gone).
 *
 * Keeper (keeper.c): setsid(); every signal that would end it ignored but SIGKILL (and the
 * faults); one the helper forked and finds stopped (SIGSTOP: waitpid WUNTRACED) before it reported
 * its start is sent SIGCONT at once; no PDEATHSIG; only its report pipe kept, stdio on /dev/null; cwd /. It holds outputFile
 * open read-only (made 0600 if missing) until it exits, never reading it: no write lease can be
 * taken on the file while the task runs (a failure here is stage output). With a stdinFifo it
 * makes that FIFO (mkfifo 0600; one already there is used) and holds it open O_RDWR until the task
 * ends or SIGUSR1 asks it to let go (end of input; a failure here is stage stdin). It forks the child,
 * reads the child's error pipe, reports on its own pipe, waits for the task, writes the exit file
 * (`{"pid":P,"exitCode":N|null,"signal":N|null,"endedAtMs":MS}` and a newline, written whole as an
 * unnamed O_TMPFILE in its folder (mode 0600), then linked in; without O_TMPFILE a temporary file
 * beside it, O_EXCL, renamed), reports the end, and exits. So the exit file is there when its
 * `exited` is reported, unless that write failed: it is then retried, after the report, for about
 * a minute while the disk refuses it (ENOSPC, EDQUOT, EROFS, ...), for about half an hour when no
 * helper heard the report (the file is then the only way its ending reaches a daemon). The file and its folder are fsynced when no helper heard the
 * report (see keeper.c). So a keeper that has exited has
 * written its exit file (unless it was SIGKILLed, or the folder was removed): an attach waits for
 * the keeper's exit, then reads the file.
 *
 * Lifeline (lifeline.c), for a +lifeline kind: the keeper becomes a child subreaper (failing that,
 * stage lifeline) and watches its report pipe: once no helper holds its read end (the helper exited
 * or was killed, as it is when the daemon dies), it SIGKILLs the task's process group and then its
 * own children (the task's leftovers, handed to it as their parents die) until it has none, and adds
 * `"lifelineBroke":true` to the exit file (before the closing brace) when the task had not ended by
 * itself. A terminal task's keeper watches it in its relay loop.
 *
 * Files a task could have made (regular.c): outputFile (keeper and child), the exit file (the
 * keeper's fsync, the helper's read after an exit or an attach) and the lease file are opened with
 * O_NOFOLLOW | O_NONBLOCK and checked with fstat to be regular files; anything else there (a link,
 * FIFO, device, socket) is refused with ENXIO (an exit file refused reads as missing; outputFile:
 * `failed <reqid> output 6`), never read or waited on.
 *
 * Child setup (child.c), in order: signal dispositions to SIG_DFL and an empty mask; setsid();
 * limits (RLIMIT_CORE 0, RLIMIT_NOFILE and RLIMIT_FSIZE soft = hard = the request's); each cgroup
 * joined (cgroup.c: its folder opened by openat2 with RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
 * its device, inode and owner checked, then 0, the child itself, one thread, written to the
 * `tasks` file opened from that descriptor, O_NOFOLLOW); descriptors: stdin /dev/null (or stdinFifo opened read-only,
 * O_NOFOLLOW, checked to be a FIFO, blocking), stdout and stderr one O_APPEND
 * description of outputFile (created 0600), then from fd 3 the extra files (read-only), the blobs
 * (each a sealed memfd reopened read-only, at offset 0) and the pinned folders (O_PATH, opened by
 * openat2 with RESOLVE_NO_SYMLINKS and checked against their device and inode, and a mapped one
 * against its owner's uid; idmapped as below), and meanwhile, once those are mounted, each hidden
 * place covered (below), every other descriptor closed; chdir(cwd) (fchdir
 * through the pinned descriptor when cwd is a pinned folder), then `.` checked against
 * cwdDev/cwdIno; a new anonymous session keyring joined (KEYCTL_JOIN_SESSION_KEYRING; nothing on
 * a kernel without keyrings), in every spawn; for another user keep-caps off, setgroups(0),
 * setgid(gid), setuid(uid), and setuid(0) must then fail; execve(file, argv, env); a file without
 * a slash is searched on the PATH of env (execvpe). openat2 needs Linux 5.6. A failing step writes
 * "<stage> <errno>[ <index>]" to an O_CLOEXEC pipe and _exits; EOF with no data on that pipe means
 * the exec succeeded. Relative paths (cwd, outputFile, ...) are resolved from the helper's cwd.
 *
 * Identity (idmap.c): a pinned folder with an owner, and every view, is idmapped: the child, still
 * root, enters a mount namespace of its own (unshare(CLONE_NEWNS), every mount made private; a
 * failure is stage idmap without an index), opens every pinned folder and view (checked as above),
 * then, ancestors first (shorter paths first), copies each mapped one (open_tree OPEN_TREE_CLONE,
 * with its submounts) from that descriptor, idmaps the copy through a user namespace whose
 * uid_map maps ownerUid to uid and every other id to itself but uid, which stays unmapped (for
 * ownerUid < uid: "0 0 <ownerUid>", "<ownerUid+1> <ownerUid+1> <uid-ownerUid-1>",
 * "<uid+1> <uid+1> <4294967294-uid>", "<ownerUid> <uid> 1"; extents that would be empty left
 * out), and gid_map the same for ownerGid and gid (mount_setattr MOUNT_ATTR_IDMAP; a view also
 * MOUNT_ATTR_RDONLY), and mounts it onto the folder opened anew (move_mount; a failure of these is
 * stage idmap with the entry's index). So under the request's user the owner's files show as that
 * user's, what it creates there belongs to the owner on disk, and files of other ids keep theirs.
 * A pinned folder's descriptor then names its idmapped mount; a view is only mounted. The helper
 * makes each such user namespace once (a process born in it by clone(CLONE_NEWUSER), its maps
 * written, its namespace opened, then killed) and keeps up to 256 of them for later spawns; one it
 * cannot make fails the spawn at stage idmap with the entry's index, before any fork. Needs Linux
 * 5.12 and a file system that supports idmapped mounts (EINVAL otherwise).
 *
 * Hidden places (hidden.c): with hiddenc > 0 the child, still root, is in a mount namespace of its
 * own as for Identity (made for either; its failure is stage idmap without an index when there are
 * mapped folders, else stage hidden without one), and after the pinned folders and views are
 * mounted it covers each hidden path in order: opened by openat2 (O_PATH, RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS), fstat'ed, then a folder gets a new tmpfs (source tend-hidden, size 4k,
 * mode 0755) and anything else a bind of /dev/null, each made detached with MOUNT_ATTR_RDONLY,
 * NOSUID, NODEV and NOEXEC (fsopen/fsmount, open_tree/mount_setattr) and moved onto the opened
 * descriptor (move_mount, no path walked again). A path that does not open with ENOENT, ENOTDIR,
 * ESTALE, ELOOP (a symbolic link on its way or at its end: never followed) or EACCES (root may not
 * enter it), or whose move_mount finds it removed (ENOENT), is skipped; any other failure is stage
 * hidden with the path's index. The covers stay in the child's namespace, and so in every copy of
 * it (bubblewrap's recursive binds of / and of the pinned folders carry them). Needs Linux 5.6.
 * Covered files follow the hidden places: each path is opened as they are and must be a regular
 * file (else EINVAL); the child makes a tmpfs of its own (source tend-covered, detached), writes the
 * blob into one file there (0644), clones that file as a detached mount with the four attributes
 * above and moves it onto the opened descriptor. Skipped as a hidden place is; a failure is stage
 * hidden, its index counted on after the hidden places.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "spawner.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define READ_CHUNK (64u * 1024u)

/* ---------------------------------------------------------------- output */

static char *out_buf;
static size_t out_len, out_cap;

void drain_signalfd(int fd) {
  struct signalfd_siginfo info[16];
  for (;;) {
    ssize_t n = read(fd, info, sizeof info);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
  }
}

void out_printf(const char *format, ...) {
  for (;;) {
    va_list args;
    va_start(args, format);
    int n = vsnprintf(out_buf + out_len, out_cap - out_len, format, args);
    va_end(args);
    if (n < 0) return;
    if ((size_t)n < out_cap - out_len) {
      out_len += (size_t)n;
      return;
    }
    out_cap = out_cap * 2 + (size_t)n + 256;
    out_buf = xrealloc(out_buf, out_cap);
  }
}

/* Writes everything buffered to stdout, handling partial writes, EINTR and a non-blocking pipe. */
static void out_flush(void) {
  size_t done = 0;
  while (done < out_len) {
    ssize_t n = write(1, out_buf + done, out_len - done);
    if (n > 0) {
      done += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd writable = {.fd = 1, .events = POLLOUT};
      if (poll(&writable, 1, -1) < 0 && errno != EINTR) _exit(1);
    } else {
      _exit(1); /* the daemon is gone (EPIPE) or stdout is broken: nobody to report to */
    }
  }
  out_len = 0;
}

void malformed(const char *format, ...) {
  char message[256];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  out_printf("error %s\n", message);
  out_flush();
  exit(2);
}

/* --------------------------------------------------------------- keepers */

enum keeper_state {
  STARTING, /* forked, its child's start not reported yet */
  RUNNING,  /* started (or attached): its exit not reported yet */
  DONE,     /* its last line (failed or exited) is out: only its reaping is left */
};

/* A keeper this helper forked (its child: reaped on SIGCHLD, fd the read end of its report
 * pipe) or attached to (fd its pidfd, readable once it has exited). fd is -1 once closed. */
struct keeper {
  pid_t pid, task;
  int fd;
  int attached;
  enum keeper_state state;
  char *exit_file; /* malloc'd, NULL for none */
  char reqid[MAX_REQID + 1];
};

static struct keeper *keepers;
static size_t keeper_count, keeper_cap;
/* keeper index + 1 by descriptor (0: none), so a ready descriptor finds its keeper at once. */
static size_t *index_by_fd;
static size_t index_by_fd_cap;
static struct pollfd *poll_fds;
static size_t poll_cap;
static char *in_buf;
static size_t in_len, in_cap;
static int signal_fd;
static long page_size = 4096;

static void map_fd(int fd, size_t slot) {
  if (fd < 0) return;
  if ((size_t)fd >= index_by_fd_cap) {
    size_t grown = ((size_t)fd + 1) * 2;
    index_by_fd = xrealloc(index_by_fd, grown * sizeof *index_by_fd);
    memset(index_by_fd + index_by_fd_cap, 0, (grown - index_by_fd_cap) * sizeof *index_by_fd);
    index_by_fd_cap = grown;
  }
  index_by_fd[fd] = slot;
}

static ssize_t find_by_fd(int fd) {
  if (fd < 0 || (size_t)fd >= index_by_fd_cap || index_by_fd[fd] == 0) return -1;
  return (ssize_t)index_by_fd[fd] - 1;
}

static ssize_t find_forked(pid_t pid) {
  for (size_t i = 0; i < keeper_count; i++)
    if (keepers[i].pid == pid && !keepers[i].attached) return (ssize_t)i;
  return -1;
}

static struct keeper *add_keeper(pid_t pid, int fd, int attached, const char *reqid, const char *exit_file) {
  if (keeper_count == keeper_cap) {
    keeper_cap = keeper_cap ? keeper_cap * 2 : 64;
    keepers = xrealloc(keepers, keeper_cap * sizeof *keepers);
  }
  struct keeper *keeper = &keepers[keeper_count++];
  memset(keeper, 0, sizeof *keeper);
  keeper->pid = pid;
  keeper->fd = fd;
  keeper->attached = attached;
  keeper->state = STARTING;
  memcpy(keeper->reqid, reqid, strlen(reqid) + 1);
  if (*exit_file) {
    size_t length = strlen(exit_file) + 1;
    keeper->exit_file = memcpy(xrealloc(NULL, length), exit_file, length);
  }
  map_fd(fd, keeper_count);
  return keeper;
}

static void close_keeper_fd(struct keeper *keeper) {
  if (keeper->fd < 0) return;
  map_fd(keeper->fd, 0);
  close(keeper->fd);
  keeper->fd = -1;
}

static void remove_keeper(size_t index) {
  close_keeper_fd(&keepers[index]);
  free(keepers[index].exit_file);
  keepers[index] = keepers[--keeper_count];
  if (index < keeper_count) map_fd(keepers[index].fd, index + 1);
}

static int highest_fd(void) {
  int highest = signal_fd;
  for (size_t i = 0; i < keeper_count; i++)
    if (keepers[i].fd > highest) highest = keepers[i].fd;
  return highest;
}

static void drop_pages(void *start, size_t length) {
  if (!start) return;
  uintptr_t page = (uintptr_t)page_size;
  uintptr_t from = ((uintptr_t)start + page - 1) & ~(page - 1);
  uintptr_t to = ((uintptr_t)start + length) & ~(page - 1);
  if (to > from) madvise((void *)from, to - from, MADV_DONTNEED);
}

void release_helper_memory(void) {
  drop_pages(in_buf, in_cap);
  drop_pages(out_buf, out_cap);
  drop_pages(keepers, keeper_cap * sizeof *keepers);
  drop_pages(index_by_fd, index_by_fd_cap * sizeof *index_by_fd);
  drop_pages(poll_fds, poll_cap * sizeof *poll_fds);
}

static void report_exit(struct keeper *keeper, int code, int signal_number, int ended_by, unsigned long long lost) {
  out_printf("exited %d %d %d%s%s\n", (int)keeper->task, code, signal_number, ended_by_word(ended_by), lost_word(lost));
  keeper->state = DONE;
}

/* The keeper is gone without a word about the exit: its exit file says, or nobody knows (-2). */
static void report_exit_from_file(struct keeper *keeper) {
  int code, signal_number, ended_by;
  unsigned long long lost = 0;
  if (read_exit_file(keeper->exit_file, keeper->task, &code, &signal_number, &ended_by, &lost)) report_exit(keeper, code, signal_number, ended_by, lost);
  else report_exit(keeper, -2, 0, 0, 0);
}

static void on_report_line(struct keeper *keeper, char *line) {
  char kind = line[0];
  const char *rest = line[0] && line[1] == ' ' ? line + 2 : "";
  if (kind == 's' && keeper->state == STARTING) {
    int task;
    unsigned long long start;
    if (sscanf(rest, "%d %llu", &task, &start) != 2) return;
    keeper->task = (pid_t)task;
    keeper->state = RUNNING;
    out_printf("started %s %d %d %llu\n", keeper->reqid, task, (int)keeper->pid, start);
  } else if (kind == 'f' && keeper->state == STARTING) {
    /* "<stage> <errno>[ <index>]", already cleaned by the keeper. */
    out_printf("failed %s %s\n", keeper->reqid, *rest ? rest : "exec 5");
    keeper->state = DONE;
  } else if (kind == 'x' && keeper->state == RUNNING) {
    int code, signal_number, ended_by = ENDED_BY_ITSELF;
    unsigned long long lost = 0;
    char words[2][32] = {"", ""};
    int fields = sscanf(rest, "%d %d %31s %31s", &code, &signal_number, words[0], words[1]);
    if (fields < 2) return;
    for (int i = 0; i < fields - 2; i++) {
      if (strcmp(words[i], "lease") == 0) ended_by = ENDED_BY_LEASE;
      else if (strncmp(words[i], "lost=", 5) == 0) lost = strtoull(words[i] + 5, NULL, 10);
    }
    report_exit(keeper, code, signal_number, ended_by, lost);
  }
}

/* Reads what a forked keeper's report pipe holds (non-blocking). Every line is one write of at
 * most a few dozen bytes, atomic, and a keeper writes three at most: a read never splits one.
 * Returns 1 if the pipe may say more. */
static int read_report(size_t index) {
  struct keeper *keeper = &keepers[index];
  char data[512];
  ssize_t n;
  do n = read(keeper->fd, data, sizeof data - 1);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (n <= 0) {
    close_keeper_fd(keeper); /* EOF: only its reaping is left */
    return 0;
  }
  data[n] = 0;
  for (char *line = data, *end; *line; line = end + 1) {
    end = strchr(line, '\n');
    if (!end) break;
    *end = 0;
    on_report_line(keeper, line);
  }
  if (keeper->state == DONE) close_keeper_fd(keeper);
  return keeper->fd >= 0;
}

static void on_keeper_fd_ready(int fd) {
  ssize_t index = find_by_fd(fd);
  if (index < 0) return;
  struct keeper *keeper = &keepers[index];
  if (!keeper->attached) {
    read_report((size_t)index);
    return;
  }
  /* An attached keeper's pidfd: it has exited. */
  report_exit_from_file(keeper);
  remove_keeper((size_t)index);
}

/*
 * Reaps what ended, and continues a keeper stopped before it reported its start: a keeper never
 * stops itself, and one that something else stopped (its own task can: they share a uid under
 * sandbox off) would hold the launch, and the kill that waits for it, before the daemon even knows
 * its pid. It is our unreaped child, so its pid is still it: SIGCONT reaches that keeper and no
 * other process. A started keeper is the daemon's to continue (once it waits for an answer).
 */
static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    ssize_t index = find_forked(pid);
    if (index < 0) continue;
    if (WIFSTOPPED(status)) {
      if (keepers[index].state == STARTING) kill(pid, SIGCONT);
      continue;
    }
    /* Whatever it said before it died is in its pipe now. */
    while (keepers[index].fd >= 0 && read_report((size_t)index)) {
    }
    struct keeper *keeper = &keepers[index];
    if (keeper->state == STARTING) out_printf("failed %s keeper %d\n", keeper->reqid, ECHILD);
    else if (keeper->state == RUNNING) report_exit_from_file(keeper);
    remove_keeper((size_t)index);
  }
}

/* ---------------------------------------------------------------- requests */

static void handle_spawn(struct request *request) {
  size_t failed_index = 0;
  if (idmap_prepare(request, &failed_index) != 0) {
    out_printf("failed %s idmap %d %zu\n", request->reqid, errno, failed_index);
    return;
  }
  int report[2];
  if (pipe2(report, O_CLOEXEC | O_NONBLOCK) != 0) {
    out_printf("failed %s fork %d\n", request->reqid, errno);
    return;
  }
  int highest = highest_fd();
  if (report[0] > highest) highest = report[0];
  if (report[1] > highest) highest = report[1];
  for (size_t i = 0; i < request->usernsc; i++)
    if (request->userns_fds[i] > highest) highest = request->userns_fds[i];

  pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    /* The keeper's writes block: its lines are tiny, but a full pipe must not lose one. */
    fcntl(report[1], F_SETFL, 0);
    run_keeper(request, report[1], highest);
  }
  int fork_error = errno;
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    out_printf("failed %s fork %d\n", request->reqid, fork_error);
    return;
  }
  add_keeper(pid, report[0], 0, request->reqid, request->exit_file);
}

/* Whether the process behind a pidfd has exited (a pidfd polls readable from then on). */
static int has_exited(int pidfd) {
  struct pollfd ready = {.fd = pidfd, .events = POLLIN};
  int n;
  do n = poll(&ready, 1, 0);
  while (n < 0 && errno == EINTR);
  return n > 0;
}

static void handle_attach(const struct attach *attach) {
  int error = 0;
  int pidfd = (int)syscall(SYS_pidfd_open, attach->keeper, 0);
  if (pidfd < 0) {
    error = errno == EINVAL ? ESRCH : errno;
  } else {
    /* The pidfd pins the process: if /proc/<pid> still shows the start time, it is that keeper. */
    unsigned long long start = 0;
    int stat_error = proc_start_time(attach->keeper, &start);
    if (stat_error || start != attach->keeper_start) {
      close(pidfd);
      pidfd = -1;
      error = stat_error == 0 || stat_error == ENOENT ? ESRCH : stat_error;
    } else if (has_exited(pidfd)) {
      /* A zombie (killed, not reaped yet by whoever inherited it) is no keeper: it keeps its pid and
       * start time, but will record nothing more. Said now, so that a recovering daemon knows. */
      close(pidfd);
      pidfd = -1;
      error = ESRCH;
    }
  }
  int code, signal_number, ended_by;
  unsigned long long lost = 0;
  if (read_exit_file(attach->exit_file, attach->task, &code, &signal_number, &ended_by, &lost)) {
    if (pidfd >= 0) close(pidfd);
    out_printf("attached %s\nexited %d %d %d%s%s\n", attach->reqid, (int)attach->task, code, signal_number, ended_by_word(ended_by), lost_word(lost));
    return;
  }
  if (pidfd < 0) {
    out_printf("failed %s attach %d\n", attach->reqid, error);
    return;
  }
  struct keeper *keeper = add_keeper(attach->keeper, pidfd, 1, attach->reqid, attach->exit_file);
  keeper->task = attach->task;
  keeper->state = RUNNING;
  out_printf("attached %s\n", attach->reqid);
}

static void handle_request(char *payload, size_t length) {
  /* "ping\0<id>\0": answered "pong <id>" at once, so the daemon can tell a helper that answers
   * (however long its keepers take) from one that is stopped or wedged. */
  if (length > 5 && memcmp(payload, "ping", 5) == 0 && payload[length - 1] == 0) {
    const char *id = payload + 5;
    size_t id_length = strlen(id);
    if (id_length == 0 || id_length > MAX_REQID || id + id_length + 1 != payload + length) malformed("bad ping");
    out_printf("pong %s\n", id);
    return;
  }
  struct request spawn;
  struct attach attach;
  void *allocation = NULL;
  if (parse_request(payload, length, &spawn, &attach, &allocation) == REQUEST_ATTACH) handle_attach(&attach);
  else handle_spawn(&spawn);
  free(allocation);
}

/* Reads what stdin has; returns 0 on EOF. Complete requests are handled as they arrive. */
static int read_requests(void) {
  if (in_cap - in_len < READ_CHUNK) {
    in_cap = in_cap * 2 + READ_CHUNK;
    in_buf = xrealloc(in_buf, in_cap);
  }
  ssize_t n = read(0, in_buf + in_len, in_cap - in_len);
  if (n < 0) return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK ? 1 : 0;
  if (n == 0) return 0;
  in_len += (size_t)n;

  size_t at = 0;
  while (in_len - at >= 4) {
    const unsigned char *header = (const unsigned char *)in_buf + at;
    uint32_t length = (uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 | (uint32_t)header[3] << 24;
    if (length == 0 || length > MAX_PAYLOAD) malformed("bad request length %u", (unsigned)length);
    if (in_len - at - 4 < length) {
      /* Incomplete: make sure the whole request will fit. */
      size_t needed = 4 + (size_t)length;
      if (at == 0 && needed > in_cap) {
        in_cap = needed + READ_CHUNK;
        in_buf = xrealloc(in_buf, in_cap);
      }
      break;
    }
    handle_request(in_buf + at + 4, length);
    at += 4 + (size_t)length;
  }
  if (at > 0) {
    memmove(in_buf, in_buf + at, in_len - at);
    in_len -= at;
  }
  return 1;
}

/* --------------------------------------------------------------- the loop */

static void close_inherited(void) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  DIR *dir = opendir("/proc/self/fd");
  if (!dir) return;
  int own = dirfd(dir);
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL) {
    int fd = atoi(entry->d_name);
    if (fd > 2 && fd != own) close(fd);
  }
  closedir(dir);
}

static size_t starting_count(void) {
  size_t count = 0;
  for (size_t i = 0; i < keeper_count; i++)
    if (keepers[i].state == STARTING) count++;
  return count;
}

int main(int argc, char **argv) {
  /* Die with the daemon. If it is already gone, stop now. (Keepers clear this: fork does.) */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc > 1) {
    if (getppid() != (pid_t)atol(argv[1])) return 0;
  } else if (getppid() == 1) {
    return 0;
  }

  long size = sysconf(_SC_PAGESIZE);
  if (size > 0) page_size = size;
  close_inherited();
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  signal_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) {
    perror("tend-spawner: signalfd");
    return 3;
  }

  /* After stdin's EOF, spawns already forked still get their started/failed line before the exit. */
  int stdin_open = 1;
  for (;;) {
    out_flush();
    if (!stdin_open && starting_count() == 0) return 0;
    if (poll_cap < keeper_count + 2) {
      poll_cap = (keeper_count + 2) * 2;
      poll_fds = xrealloc(poll_fds, poll_cap * sizeof *poll_fds);
    }
    size_t nfds = 0;
    poll_fds[nfds++] = (struct pollfd){.fd = stdin_open ? 0 : -1, .events = POLLIN};
    poll_fds[nfds++] = (struct pollfd){.fd = signal_fd, .events = POLLIN};
    for (size_t i = 0; i < keeper_count; i++)
      if (keepers[i].fd >= 0) poll_fds[nfds++] = (struct pollfd){.fd = keepers[i].fd, .events = POLLIN};

    if (poll(poll_fds, (nfds_t)nfds, -1) < 0) {
      if (errno == EINTR) continue;
      perror("tend-spawner: poll");
      return 3;
    }
    /* Report pipes and pidfds first (started/failed/exited), then reaping, then new requests. */
    for (size_t i = 2; i < nfds; i++)
      if (poll_fds[i].revents) on_keeper_fd_ready(poll_fds[i].fd);
    if (poll_fds[1].revents) {
      drain_signalfd(signal_fd);
      reap();
    }
    if (poll_fds[0].revents && !read_requests()) stdin_open = 0;
  }
}
