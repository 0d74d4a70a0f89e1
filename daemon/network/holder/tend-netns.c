/*
 * tend-netns: holds one owner's private network namespace (only `lo`, up) and makes sockets in it
 * for the daemon (daemon/network/owner-network.ts).
 *
 *   tend-netns DAEMON_PID new                  a new namespace (root: a network namespace; any
 *                                              other uid: a user namespace mapping only itself,
 *                                              and a network namespace it owns)
 *   tend-netns DAEMON_PID join PATH DEV INO    the namespace PATH names (/proc/<pid>/ns/net of a
 *                                              task that outlived the daemon before), only if it is
 *                                              that very namespace (DEV, INO as stat gives them)
 *
 * Descriptor 3 is its end of a SOCK_SEQPACKET pair. It answers `ready` once in the namespace, then
 * each request with one reply:
 *   `tcp ADDRESS PORT` -> a listening TCP socket bound there   `ok` + the socket (SCM_RIGHTS)
 *   `udp ADDRESS PORT` -> a UDP socket bound there             `ok` + the socket
 *   `connect ADDRESS PORT` -> a non-blocking TCP socket        `ok` + the socket
 *                         connecting from inside to ADDRESS:PORT (a readiness URL's try); the
 *                         connection completes, or fails, on the daemon's side
 *   failure                                                    `err ERRNO STEP`
 * It exits when the daemon closes its end, or dies (PR_SET_PDEATHSIG). The namespace lives on as
 * long as a task, or a socket made in it, does.
 *
 * Ports below 1024 are bound here, where the holder has CAP_NET_BIND_SERVICE over the namespace;
 * a task, without capabilities, cannot take them first.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef NS_GET_USERNS
#define NS_GET_USERNS 0xb701
#endif

#define CONTROL 3

static void reply(const char *text, int fd) {
  struct iovec part = {(void *)text, strlen(text)};
  char space[CMSG_SPACE(sizeof(int))];
  struct msghdr message = {.msg_iov = &part, .msg_iovlen = 1};
  if (fd >= 0) {
    memset(space, 0, sizeof space);
    message.msg_control = space;
    message.msg_controllen = sizeof space;
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &fd, sizeof(int));
  }
  while (sendmsg(CONTROL, &message, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) exit(0);
  }
}

static void fail(int error, const char *step) {
  char text[96];
  snprintf(text, sizeof text, "err %d %s", error, step);
  reply(text, -1);
}

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t wrote;
  do wrote = write(fd, text, strlen(text));
  while (wrote < 0 && errno == EINTR);
  int error = errno;
  close(fd);
  errno = error;
  return wrote == (ssize_t)strlen(text) ? 0 : -1;
}

/* A new network namespace; for an unprivileged daemon inside a user namespace of its own that maps
 * only its uid and gid (nothing of the host's ids is gained), which owns the network namespace. */
static const char *make_namespace(void) {
  if (geteuid() == 0) return unshare(CLONE_NEWNET) == 0 ? NULL : "unshare";
  char map[64];
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) return "unshare";
  if (write_file("/proc/self/setgroups", "deny") != 0 && errno != ENOENT) return "setgroups";
  snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
  if (write_file("/proc/self/uid_map", map) != 0) return "uid_map";
  snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
  if (write_file("/proc/self/gid_map", map) != 0) return "gid_map";
  return NULL;
}

/* The namespace PATH opens, if it is the one (DEV, INO); first the user namespace that owns it,
 * when that is not ours (an unprivileged daemon's namespaces). */
static const char *join_namespace(const char *path, unsigned long long dev, unsigned long long ino) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "open";
  struct stat info, own;
  if (fstat(fd, &info) != 0) return "fstat";
  if ((unsigned long long)info.st_dev != dev || (unsigned long long)info.st_ino != ino) {
    errno = ESTALE;
    return "identity";
  }
  int userns = ioctl(fd, NS_GET_USERNS);
  if (userns < 0) return "userns";
  if (fstat(userns, &info) != 0 || stat("/proc/self/ns/user", &own) != 0) return "userns";
  if ((info.st_dev != own.st_dev || info.st_ino != own.st_ino) && setns(userns, CLONE_NEWUSER) != 0) return "setns user";
  close(userns);
  if (setns(fd, CLONE_NEWNET) != 0) return "setns net";
  close(fd);
  return NULL;
}

static const char *loopback_up(void) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "socket";
  struct ifreq request;
  memset(&request, 0, sizeof request);
  strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &request) != 0) return "lo";
  request.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(fd, SIOCSIFFLAGS, &request) != 0) return "lo";
  close(fd);
  return NULL;
}

/* Starts connecting the non-blocking socket FD: FD, or -1 (closed) with *step set. It is not
 * waited for: the daemon waits for the reply on its thread, and a listener that never accepts (its
 * backlog full, which a task can arrange) would hold it; the daemon's socket completes it. */
static int connect_started(int fd, const struct sockaddr *address, socklen_t length, const char **step) {
  if (connect(fd, address, length) == 0 || errno == EINPROGRESS) return fd;
  int error = errno;
  close(fd);
  errno = error;
  *step = "connect";
  return -1;
}

/* A socket bound to ADDRESS:PORT (TCP: listening), or connected to it (`connect`), or -1 with
 * *step set. */
static int make_socket(int stream, int connecting, const char *address, const char *port_text, const char **step) {
  struct sockaddr_storage storage;
  memset(&storage, 0, sizeof storage);
  socklen_t length;
  char *end;
  unsigned long port = strtoul(port_text, &end, 10);
  if (*end || port > 65535) {
    errno = EINVAL;
    *step = "port";
    return -1;
  }
  struct sockaddr_in *v4 = (struct sockaddr_in *)&storage;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&storage;
  if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((unsigned short)port);
    length = sizeof *v4;
  } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((unsigned short)port);
    length = sizeof *v6;
  } else {
    errno = EINVAL;
    *step = "address";
    return -1;
  }
  int fd = socket(storage.ss_family, (stream ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC | (connecting ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) {
    *step = "socket";
    return -1;
  }
  if (connecting) return connect_started(fd, (struct sockaddr *)&storage, length, step);
  int on = 1;
  if (stream) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (bind(fd, (struct sockaddr *)&storage, length) != 0) {
    *step = "bind";
  } else if (stream && listen(fd, 511) != 0) {
    *step = "listen";
  } else {
    return fd;
  }
  int error = errno;
  close(fd);
  errno = error;
  return -1;
}

int main(int argc, char **argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc < 3 || getppid() != (pid_t)atol(argv[1])) return 0;
  signal(SIGPIPE, SIG_IGN);
  const char *step;
  if (strcmp(argv[2], "new") == 0 && argc == 3) {
    step = make_namespace();
  } else if (strcmp(argv[2], "join") == 0 && argc == 6) {
    step = join_namespace(argv[3], strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
  } else {
    fprintf(stderr, "usage: tend-netns DAEMON_PID new | join PATH DEV INO\n");
    return 2;
  }
  if (step == NULL) step = loopback_up();
  if (step != NULL) {
    fail(errno, step);
    return 1;
  }
  reply("ready", -1);
  char request[256];
  for (;;) {
    ssize_t got = recv(CONTROL, request, sizeof request - 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
    request[got] = 0;
    char kind[8], address[64], port[8];
    if (sscanf(request, "%7s %63s %7s", kind, address, port) != 3 ||
        (strcmp(kind, "tcp") != 0 && strcmp(kind, "udp") != 0 && strcmp(kind, "connect") != 0)) {
      fail(EINVAL, "request");
      continue;
    }
    int connecting = strcmp(kind, "connect") == 0;
    int fd = make_socket(connecting || strcmp(kind, "tcp") == 0, connecting, address, port, &step);
    if (fd < 0) {
      fail(errno, step);
      continue;
    }
    reply("ok", fd);
    close(fd);
  }
}
