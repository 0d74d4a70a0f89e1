/*
 * tend-spawner: opening a file whose path a task could have made (its output file, its exit file,
 * its lease file: all in its spool folder, which a task under `off` can write). Such a path may
 * hold a symbolic link, a FIFO (an open blocks until a writer comes: the helper's single thread, or
 * a keeper's watch, would stop), a device or a socket. So the open never follows a link in the
 * last component, never waits (O_NONBLOCK; a FIFO opens at once, a file under a lease fails at once
 * with EWOULDBLOCK), never takes a controlling terminal, and is checked with fstat before a byte
 * is read or written: anything but a regular file with one name (a hard link would reach a file
 * of someone else's) is closed again and refused with ENXIO (what the kernel answers for a
 * socket, or for a FIFO opened to write with no reader).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "spawner.h"

int open_regular(int dir_fd, const char *path, int flags, mode_t mode) {
  int fd;
  do fd = openat(dir_fd, path, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  struct stat info;
  int error = 0;
  if (fstat(fd, &info) != 0) error = errno;
  else if (!S_ISREG(info.st_mode) || info.st_nlink > 1) error = ENXIO;
  if (!error) return fd;
  close(fd);
  errno = error;
  return -1;
}
