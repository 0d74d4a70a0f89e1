/*
 * tend-spawner: the task child joins its cgroups, each through the very folder the daemon made.
 *
 * A group's parent may belong to another uid (delegated to a user), who could rename the group
 * between its creation and the join and put a folder of its own, without limits, at its path. So
 * the folder is opened without following any symbolic link, checked to be the one the daemon made
 * (device, inode and owner), and its `tasks` file (v1; cgroup.procs on v2) opened from that
 * descriptor: no path is walked again after the check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "spawner.h"

/* 0: this thread. We have one, so that moves the whole process, without the kernel's global
 * threadgroup lock that a write to cgroup.procs takes (see child.c). On v2, where a domain group
 * has no `tasks`, 0 in cgroup.procs is this process, and the lock is taken. */
static const char self[] = "0\n";

int join_cgroup(const struct cgroup_join *group) {
  struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  int dir;
  do dir = (int)syscall(SYS_openat2, AT_FDCWD, group->path, &how, sizeof how);
  while (dir < 0 && errno == EINTR);
  if (dir < 0) return -1;
  struct stat info;
  int error = 0;
  if (fstat(dir, &info) != 0) error = errno;
  else if ((unsigned long long)info.st_dev != group->dev || (unsigned long long)info.st_ino != group->ino || (unsigned long long)info.st_uid != group->uid) error = ESTALE;
  int tasks = -1;
  if (!error) {
    do tasks = openat(dir, "tasks", O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    while (tasks < 0 && errno == EINTR);
    /* A cgroup v2 group has no `tasks`: its cgroup.procs moves the process (one thread here). */
    if (tasks < 0 && errno == ENOENT) {
      do tasks = openat(dir, "cgroup.procs", O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
      while (tasks < 0 && errno == EINTR);
    }
    if (tasks < 0) error = errno;
  }
  close(dir);
  if (!error) {
    ssize_t written;
    do written = write(tasks, self, sizeof self - 1);
    while (written < 0 && errno == EINTR);
    if (written < 0) error = errno;
    else if ((size_t)written != sizeof self - 1) error = EIO;
    close(tasks);
  }
  errno = error;
  return error ? -1 : 0;
}
