/*
 * tend-spawner: the task child hides places from its task by descriptor (see "Hidden places" in
 * PROTOCOL.md).
 *
 * The places are the daemon's masks: tend homes and secret paths, many of them other users'. Their
 * owners may remove one, or put a link in its place, at any moment; a mount made by path would then
 * fail (and the task with it) or land where the link leads. So each is opened once, without
 * following any link, and the cover is mounted onto what was opened: a place that is gone, or that
 * a link now leads to, is skipped (nothing of its owner's is there to hide, and a link is never
 * followed), and one removed after the open is left alone (it exists nowhere any more). The new
 * mount API mounts onto the descriptor itself: no path is walked again, not even /proc/self/fd.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "mount-api.h"
#include "spawner.h"

/* Read-only, and nothing on it runs, carries a set-id bit or opens as a device. bubblewrap adds
 * these to every mount under the ones it binds (one remount by path each, where they are missing):
 * with them all set it has nothing to change, and never walks these paths. */
#define COVER_ATTRIBUTES (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

static int fs_string(int fs, const char *key, const char *value) {
  return (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, value, 0);
}

/* A detached mount of a new, empty tmpfs of one page: the cover of a folder. */
static int empty_folder(void) {
  int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0) return -1;
  int cover = -1, error = 0;
  if (fs_string(fs, "source", "tend-hidden") != 0 || fs_string(fs, "size", "4k") != 0 || fs_string(fs, "mode", "0755") != 0 ||
      syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0)
    error = errno;
  else if ((cover = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, COVER_ATTRIBUTES)) < 0)
    error = errno;
  close(fs);
  errno = error;
  return cover;
}

/* A detached bind of /dev/null: the cover of anything that is not a folder. */
static int null_file(void) {
  int cover = (int)syscall(SYS_open_tree, AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (cover < 0) return -1;
  struct mount_attr attr = {.attr_set = COVER_ATTRIBUTES};
  if (syscall(SYS_mount_setattr, cover, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0) return cover;
  int error = errno;
  close(cover);
  errno = error;
  return -1;
}

/* Writes all of `data` to fd; 0, or the errno. */
static int write_whole(int fd, const struct blob *data) {
  for (size_t done = 0; done < data->length;) {
    ssize_t n = write(fd, data->bytes + done, data->length - done);
    if (n > 0) done += (size_t)n;
    else if (n == 0) return EIO;
    else if (errno != EINTR) return errno;
  }
  return 0;
}

/* A detached read-only mount of one file holding `data`: a tmpfs of its own, written while it is
 * still detached and writable, then cut down to the file and given the cover's attributes. */
static int data_file(const struct blob *data) {
  int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  if (fs < 0) return -1;
  int root = -1, cover = -1, error = 0;
  if (fs_string(fs, "source", "tend-covered") != 0 || fs_string(fs, "mode", "0755") != 0 || syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0)
    error = errno;
  else if ((root = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0)
    error = errno;
  close(fs);
  if (!error) {
    int file;
    do file = openat(root, "file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    while (file < 0 && errno == EINTR);
    if (file < 0) error = errno;
    else {
      error = write_whole(file, data);
      if (close(file) != 0 && !error && errno != EINTR) error = errno;
    }
  }
  if (!error && (cover = (int)syscall(SYS_open_tree, root, "file", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)) < 0) error = errno;
  if (!error) {
    struct mount_attr attr = {.attr_set = COVER_ATTRIBUTES};
    if (syscall(SYS_mount_setattr, cover, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) error = errno;
  }
  if (root >= 0) close(root);
  if (error && cover >= 0) close(cover);
  errno = error;
  return error ? -1 : cover;
}

/*
 * Why an open finds nothing to hide: gone (ENOENT, ENOTDIR: a folder on the way is now a file,
 * ESTALE: removed on a network file system), a link on the way or in its place (ELOOP), or a place
 * that root itself may not enter (EACCES: another user's FUSE mount, a file system that maps root to
 * nobody), which the task, on a uid of no more rights, may not enter either.
 */
static int nothing_to_hide(int error) {
  return error == ENOENT || error == ENOTDIR || error == ESTALE || error == ELOOP || error == EACCES;
}

/* The place at `path`, as an O_PATH descriptor: no link followed on the way, nor at its end. */
static int open_place(const char *path) {
  struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  int place;
  do place = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  while (place < 0 && errno == EINTR);
  return place;
}

int hide_place(const char *path) {
  int place = open_place(path);
  if (place < 0) return nothing_to_hide(errno) ? 0 : -1;
  struct stat info;
  int error = 0;
  if (fstat(place, &info) != 0) {
    error = errno;
  } else {
    int cover = S_ISDIR(info.st_mode) ? empty_folder() : null_file();
    if (cover < 0) error = errno;
    /* ENOENT: removed since it was opened, and so from every namespace: nothing left to hide. */
    else if (syscall(SYS_move_mount, cover, "", place, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0 && errno != ENOENT) error = errno;
    if (cover >= 0) close(cover);
  }
  close(place);
  errno = error;
  return error ? -1 : 0;
}

int cover_file(const char *path, const struct blob *data) {
  int place = open_place(path);
  if (place < 0) return nothing_to_hide(errno) ? 0 : -1;
  struct stat info;
  int error = 0;
  if (fstat(place, &info) != 0) {
    error = errno;
  } else if (!S_ISREG(info.st_mode)) {
    error = EINVAL;
  } else {
    int cover = data_file(data);
    if (cover < 0) error = errno;
    /* Replaced since it was opened (a user added on the host renames a new /etc/passwd in): the
     * cover goes on the old one, and the task reads the new host file, never fails for it. */
    else if (syscall(SYS_move_mount, cover, "", place, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0 && errno != ENOENT) error = errno;
    if (cover >= 0) close(cover);
  }
  close(place);
  errno = error;
  return error ? -1 : 0;
}
