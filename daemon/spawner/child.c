/*
 * tend-spawner: the task child, forked by its keeper. Its setup, from signals to exec, as the
 * comment at the top of tend-spawner.c lists it; a failing step writes "<stage> <errno>[ <index>]"
 * to the O_CLOEXEC error pipe and _exits, so EOF with no data means the exec succeeded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/keyctl.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include "spawner.h"

#ifndef NS_GET_USERNS
#define NS_GET_USERNS 0xb701
#endif

extern char **environ;

static int error_fd;

__attribute__((noreturn)) static void child_fail(const char *stage, int error, long index) {
  char message[64];
  int n = index >= 0 ? snprintf(message, sizeof message, "%s %d %ld", stage, error, index)
                     : snprintf(message, sizeof message, "%s %d", stage, error);
  while (write(error_fd, message, (size_t)n) < 0 && errno == EINTR) {
  }
  _exit(127);
}

static int kept(int fd, int keep, const int *more, size_t count) {
  if (fd == keep) return 1;
  for (size_t i = 0; i < count; i++)
    if (more[i] == fd) return 1;
  return 0;
}

void close_except(int low, int keep, const int *more, size_t count, int highest_known) {
#ifdef SYS_close_range
  /* The gaps between the kept descriptors, lowest first: a few kept ones, so a scan per gap. */
  int from = low, ok = 1;
  while (ok) {
    int next = -1;
    if (keep >= from) next = keep;
    for (size_t i = 0; i < count; i++)
      if (more[i] >= from && (next < 0 || more[i] < next)) next = more[i];
    if (next < 0) {
      if (syscall(SYS_close_range, (unsigned)from, ~0u, 0u) != 0) ok = 0;
      break;
    }
    if (next > from && syscall(SYS_close_range, (unsigned)from, (unsigned)next - 1, 0u) != 0) ok = 0;
    from = next + 1;
  }
  if (ok) return;
#endif
  /* No close_range (kernel < 5.9): every descriptor the helper opens is below highest_known
   * and O_CLOEXEC anyway. */
  for (int fd = low; fd <= highest_known; fd++)
    if (!kept(fd, keep, more, count)) close(fd);
}

void close_from(int low, int keep, int highest_known) {
  close_except(low, keep, NULL, 0, highest_known);
}

/* Moves fd to the lowest free descriptor >= low (O_CLOEXEC), so the dup2s cannot collide. */
static int move_above(int fd, int low) {
  if (fd < 0 || fd >= low) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, low);
  int error = errno;
  close(fd);
  errno = error;
  return moved;
}

static int open_retrying(const char *path, int flags, mode_t mode) {
  int fd;
  do fd = open(path, flags | O_CLOEXEC | O_NOCTTY, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

/* A blob as a sealed memory file, reopened read-only through /proc (a new description, at offset 0). */
static int open_blob(const struct blob *blob) {
  int memfd = memfd_create("tend-data", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) return -1;
  int error = 0;
  for (size_t done = 0; done < blob->length && !error;) {
    ssize_t n = write(memfd, blob->bytes + done, blob->length - done);
    if (n > 0) done += (size_t)n;
    else if (n == 0) error = EIO;
    else if (errno != EINTR) error = errno;
  }
  if (!error && fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) error = errno;
  int readonly = -1;
  if (!error) {
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
    readonly = open_retrying(path, O_RDONLY, 0);
    if (readonly < 0) error = errno;
  }
  close(memfd);
  errno = error;
  return readonly;
}

/* A pinned folder, opened without following any symbolic link; ESTALE when it is another one (or,
 * with check_owner and mapped, has another owner: through an idmapped mount the owner shows mapped).
 * Its group is not compared: the group mapped is its owner's primary group, never the folder's. */
static int open_pinned(const struct pin *pin, int check_owner) {
  struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
  int fd;
  do fd = (int)syscall(SYS_openat2, AT_FDCWD, pin->path, &how, sizeof how);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  struct stat info;
  int error = 0;
  if (fstat(fd, &info) != 0) error = errno;
  else if ((unsigned long long)info.st_dev != pin->dev || (unsigned long long)info.st_ino != pin->ino) error = ESTALE;
  else if (check_owner && pin->mapped && (unsigned long long)info.st_uid != pin->owner_uid) error = ESTALE;
  if (!error) return fd;
  close(fd);
  errno = error;
  return -1;
}

/* Entry k of the pinned folders then the views, and where its descriptor is kept. */
static const struct pin *folder(const struct request *r, size_t k) {
  return k < r->pinc ? &r->pins[k] : &r->views[k - r->pinc];
}
static int *folder_fd(struct request *r, size_t k) {
  return k < r->pinc ? &r->fds[r->extrac + r->datac + k] : &r->view_fds[k - r->pinc];
}

/*
 * The pinned folders and the views, each opened and checked as pinned (a failure: stage pinned).
 * Mapped ones then get an idmapped copy mounted over them (stage idmap), in the child's own mount
 * namespace, ancestors first (shorter paths first) so that a folder mounted inside another
 * stays visible. Each copy is taken from the folder as opened before anything was mounted (a copy
 * of an idmapped mount cannot be idmapped again) and mounted onto the folder opened anew through
 * what was mounted above it; its descriptor replaces the pinned one. The views' are closed after.
 */
static void open_folders(struct request *r, int low) {
  size_t total = r->pinc + r->viewc;
  for (size_t k = 0; k < total; k++) {
    int fd = move_above(open_pinned(folder(r, k), 1), low);
    if (fd < 0) child_fail("pinned", errno, (long)k);
    *folder_fd(r, k) = fd;
  }
  if (r->usernsc == 0) return;
  size_t previous = total, previous_length = 0;
  for (size_t done = 0; done < total; done++) {
    size_t next = total, next_length = 0;
    for (size_t k = 0; k < total; k++) {
      size_t length = strlen(folder(r, k)->path);
      int after = previous == total || length > previous_length || (length == previous_length && k > previous);
      if (after && (next == total || length < next_length)) {
        next = k;
        next_length = length;
      }
    }
    previous = next;
    previous_length = next_length;
    const struct pin *entry = folder(r, next);
    if (!entry->mapped) continue;
    int *fd = folder_fd(r, next);
    int target = open_pinned(entry, 0);
    if (target < 0) child_fail("pinned", errno, (long)next);
    int attached = move_above(idmap_attach(*fd, target, entry->userns, next >= r->pinc), low);
    if (attached < 0) child_fail("idmap", errno, (long)next);
    close(target);
    close(*fd);
    *fd = attached;
  }
  for (size_t i = 0; i < r->viewc; i++) close(r->view_fds[i]);
  for (size_t i = 0; i < r->usernsc; i++) close(r->userns_fds[i]);
}

/*
 * The read end of the task's stdin FIFO. Its keeper holds the FIFO open for reading and writing, so
 * this open never waits for a writer; O_NONBLOCK makes sure of it, and is cleared again so that
 * the task reads as from any pipe (blocking). A path that is not a FIFO (swapped meanwhile) is
 * refused (ENXIO): the task never reads from a file it was not given.
 */
static int open_stdin_fifo(const char *path) {
  int fd = open_retrying(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW, 0);
  if (fd < 0) return -1;
  struct stat info;
  int error = 0;
  if (fstat(fd, &info) != 0) error = errno;
  else if (!S_ISFIFO(info.st_mode)) error = ENXIO;
  else {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) error = errno;
  }
  if (!error) return fd;
  close(fd);
  errno = error;
  return -1;
}

/*
 * The output file, as a regular file only (regular.c: a link, FIFO, device or socket put in its
 * place is refused), appended to. O_NONBLOCK, needed for the open, is cleared again: the task sees
 * its stdout as any file it was handed.
 */
static int open_output(const char *path) {
  int fd = open_regular(AT_FDCWD, path, O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd < 0) return -1;
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0) return fd;
  int error = errno;
  close(fd);
  errno = error;
  return -1;
}

static int join_network(const struct request *r) {
  int fd = open(r->netns, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat info, own;
  int userns = -1;
  if (fstat(fd, &info) != 0) goto failed;
  if ((unsigned long long)info.st_dev != r->netns_dev || (unsigned long long)info.st_ino != r->netns_ino) {
    errno = ESTALE;
    goto failed;
  }
  userns = ioctl(fd, NS_GET_USERNS);
  if (userns < 0 || fstat(userns, &info) != 0 || stat("/proc/self/ns/user", &own) != 0) goto failed;
  if ((info.st_dev != own.st_dev || info.st_ino != own.st_ino) && setns(userns, CLONE_NEWUSER) != 0) goto failed;
  if (setns(fd, CLONE_NEWNET) != 0) goto failed;
  close(userns);
  close(fd);
  return 0;
failed:;
  int error = errno;
  if (userns >= 0) close(userns);
  close(fd);
  errno = error;
  return -1;
}

__attribute__((noreturn)) void run_child(struct request *r, int error_pipe, int highest_known) {
  error_fd = error_pipe;
  /* A program that reports its setup says so on fd 2, the keeper's setup channel, until it points
   * fd 2 at its output itself; closed below, the original is not the task's. */
  if (r->setup_fd >= 0 && dup2(r->setup_fd, 2) < 0) child_fail("output", errno, -1);
  /* Hygiene first: drop everything of the helper's but stdio and the error pipe, so the opens
   * below get low descriptors (the task's RLIMIT_NOFILE may be smaller than the helper's table). */
  close_except(3, error_fd, r->userns_fds, r->usernsc, highest_known);

  /* 1. Default signal dispositions, empty mask (the helper blocks SIGCHLD and ignores SIGPIPE). */
  struct sigaction default_action;
  memset(&default_action, 0, sizeof default_action);
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &default_action, NULL); /* EINVAL for KILL, STOP, glibc's own: fine */
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, NULL);

  /* 2. A new session (and process group). */
  if (setsid() < 0) child_fail("setsid", errno, -1);

  /* 3. Limits. */
  struct rlimit core = {0, 0};
  struct rlimit files = {(rlim_t)r->open_files, (rlim_t)r->open_files};
  struct rlimit fsize = {(rlim_t)r->file_size, (rlim_t)r->file_size};
  if (setrlimit(RLIMIT_CORE, &core) != 0) child_fail("limits", errno, -1);
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) child_fail("limits", errno, -1);
  if (setrlimit(RLIMIT_FSIZE, &fsize) != 0) child_fail("limits", errno, -1);

  /* 4. Join the cgroups, each through the folder the daemon made (cgroup.c): 0 (this thread) into
   * its v1 `tasks` file. We have one thread, so that moves the whole process, and a thread moving
   * itself is the one migration the kernel makes without its global threadgroup lock: writing our
   * pid to cgroup.procs takes that lock, whose first writer after a quiet spell waits out an RCU
   * grace period (5-16 ms per task measured here under load, 0.1 ms this way; docs/benchmarks.md). */
  for (size_t i = 0; i < r->cgc; i++)
    if (join_cgroup(&r->cgroups[i]) != 0) child_fail("cgroup", errno, (long)i);

  /* 5. Descriptors: open everything above the target range 0 .. 3+slots-1, then dup2 down. The
   * slots are the extra files, then the blobs, then the pinned folders (idmapped where asked:
   * open_folders). The hidden places are covered on the way (hidden.c). */
  size_t slots = r->extrac + r->datac + r->pinc;
  int low = 3 + (int)slots;
  int moved = move_above(error_fd, low);
  if (moved < 0) child_fail("extra", errno, -1);
  error_fd = moved;

  int stdin_fd, output_fd;
  if (r->tty) {
    /* The terminal is fd 0, the keeper's (keeper.c): it becomes this new session's controlling
     * terminal, and stdin, stdout and stderr. */
    if (ioctl(0, TIOCSCTTY, 0) != 0) child_fail("tty", errno, -1);
    stdin_fd = fcntl(0, F_DUPFD_CLOEXEC, low);
    output_fd = stdin_fd < 0 ? -1 : fcntl(0, F_DUPFD_CLOEXEC, low);
    if (output_fd < 0) child_fail("tty", errno, -1);
  } else {
    stdin_fd = move_above(*r->stdin_fifo ? open_stdin_fifo(r->stdin_fifo) : open_retrying("/dev/null", O_RDONLY, 0), low);
    if (stdin_fd < 0) child_fail("stdin", errno, -1);
    output_fd = move_above(open_output(r->output), low);
    if (output_fd < 0) child_fail("output", errno, -1);
  }

  int *fds = r->fds;
  for (size_t i = 0; i < r->extrac; i++)
    if ((*fds++ = move_above(open_retrying(r->extra[i], O_RDONLY, 0), low)) < 0) child_fail("extra", errno, (long)i);
  for (size_t i = 0; i < r->datac; i++)
    if ((*fds++ = move_above(open_blob(&r->data[i]), low)) < 0) child_fail("data", errno, (long)i);
  /* A mount namespace of the child's own for its idmapped folders and the places it hides: what is
   * mounted there reaches no one else. The places are covered once the folders are mounted, so a
   * place inside an idmapped folder is covered where the task sees it (and a cover is never in a
   * tree that is copied to be idmapped). */
  if ((r->usernsc > 0 || r->hiddenc > 0 || r->coverc > 0) && idmap_private_namespace() != 0) child_fail(r->usernsc > 0 ? "idmap" : "hidden", errno, -1);
  open_folders(r, low);
  for (size_t i = 0; i < r->hiddenc; i++)
    if (hide_place(r->hidden[i]) != 0) child_fail("hidden", errno, (long)i);
  /* Covered files number on after the hidden places in a failure's index. */
  for (size_t i = 0; i < r->coverc; i++)
    if (cover_file(r->covers[i].path, &r->covers[i].data) != 0) child_fail("hidden", errno, (long)(r->hiddenc + i));

  /* dup2 clears O_CLOEXEC on the target; the sources are all >= low, so none equals its target. */
  if (dup2(stdin_fd, 0) < 0) child_fail("stdin", errno, -1);
  if (dup2(output_fd, 1) < 0 || (r->setup_fd < 0 && dup2(output_fd, 2) < 0)) child_fail("output", errno, -1);
  for (size_t slot = 0; slot < slots; slot++) {
    if (dup2(r->fds[slot], 3 + (int)slot) >= 0) continue;
    if (slot < r->extrac) child_fail("extra", errno, (long)slot);
    if (slot < r->extrac + r->datac) child_fail("data", errno, (long)(slot - r->extrac));
    child_fail("pinned", errno, (long)(slot - r->extrac - r->datac));
  }
  close(stdin_fd);
  close(output_fd);
  for (size_t slot = 0; slot < slots; slot++) close(r->fds[slot]);

  /* 6. cwd, through its pinned descriptor when it is a pinned folder (no path walk to race). */
  int pinned_cwd = -1;
  for (size_t i = 0; i < r->pinc && pinned_cwd < 0; i++)
    if (strcmp(r->pins[i].path, r->cwd) == 0) pinned_cwd = 3 + (int)(r->extrac + r->datac + i);
  if ((pinned_cwd >= 0 ? fchdir(pinned_cwd) : chdir(r->cwd)) != 0) child_fail("chdir", errno, -1);
  if (r->check_cwd) {
    struct stat here;
    if (stat(".", &here) != 0) child_fail("chdir", errno, -1);
    if ((unsigned long long)here.st_dev != r->cwd_dev || (unsigned long long)here.st_ino != r->cwd_ino) child_fail("chdir", ESTALE, -1);
  }

  /* 6b. The owner's private network: joined by descriptor, only if it is the namespace the daemon
   * named; its owning user namespace first when that is not ours (an unprivileged daemon's). */
  if (*r->netns && join_network(r) != 0) child_fail("netns", errno, -1);

  /* 7. A session keyring of its own, new and empty, whatever the profile: the one inherited is
   * the daemon's (its keys, and a place to plant keys for other owners' tasks to find). Joined
   * before the user changes, so that a root daemon's keyrings count against root's key quota, not
   * against the task uid every task of one owner shares (200 keys by default: a task per key). The task
   * possesses it all the same. A kernel without keyrings has nothing to inherit. */
  if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 && errno != ENOSYS) child_fail("keyring", errno, -1);

  /* 8. The user, last. From root to another uid the kernel clears every capability (unless
   * keep-caps is set: it is cleared first); a drop that could be undone fails the spawn. */
  if (r->set_user) {
    if (prctl(PR_SET_KEEPCAPS, 0L, 0L, 0L, 0L) != 0) child_fail("user", errno, -1);
    if (setgroups(0, NULL) != 0) child_fail("user", errno, -1);
    if (setgid((gid_t)r->gid) != 0) child_fail("user", errno, -1);
    if (setuid((uid_t)r->uid) != 0) child_fail("user", errno, -1);
    if (r->uid != 0 && setuid(0) == 0) child_fail("user", EPERM, -1);
  }

  /* 9. exec. A file without a slash is searched on the task's own PATH (execvpe reads environ). */
  if (strchr(r->file, '/') == NULL) {
    environ = r->envp;
    execvpe(r->file, r->argv, r->envp);
  } else {
    execve(r->file, r->argv, r->envp);
  }
  child_fail("exec", errno, -1);
}
