// Who is on the other end of a unix socket, as the kernel recorded it at connect(): the daemon's
// sandbox check (daemon/peer/peer-check.ts) refuses callers whose namespaces differ from its own.
// Node cannot read SO_PEERCRED, hence this part of the addon daemon/native/addon.c.
//
// inspect(fd) answers the credentials and, for a known pid, the identity (st_dev:st_ino) of the
// peer's user, pid and mount namespaces, read race-free: the process is pinned by a pidfd taken
// from the socket itself (SO_PEERPIDFD, Linux 6.5+) before /proc/<pid>/ns/* is read, and the same
// pidfd proves afterwards that it is still alive, so the pid cannot have been reused in between.
// On older kernels the pidfd comes from pidfd_open(pid) (the gap between connect() and that call
// stays open: `pinning` says which one was used). Where /proc/<pid>/ns is closed to the daemon (a
// daemon that is not root, called by root), inspect() reads what every process may read instead:
// the pid-namespace depth, the id of the first visible mount and the uid_map (visible_facts()).
//
// boundPath(fd) answers the other fact the daemon needs about its own unix sockets: which inode a
// listening socket's path was made as (sock_diag's UNIX_DIAG_VFS), a fact of the socket itself.
// Looking at the path instead (lstat after bind) would take whatever a process of the daemon's uid
// put there in between for the daemon's own socket.
#define _GNU_SOURCE
#include "../native/addon.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
// The same numbers on every architecture (syscalls added after the tables were unified).
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

static const char *const NAMESPACES[] = {"user", "pid", "mnt"};
#define NAMESPACE_COUNT 3

#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((call) != napi_ok) return NULL;                                                            \
  } while (0)

static napi_value throw_errno(napi_env env, const char *what, int error) {
  char message[160];
  snprintf(message, sizeof message, "%s: %s", what, strerror(error));
  napi_throw_error(env, NULL, message);
  return NULL;
}

static int set_int(napi_env env, napi_value object, const char *name, int64_t value) {
  napi_value number;
  if (napi_create_int64(env, value, &number) != napi_ok) return -1;
  return napi_set_named_property(env, object, name, number) == napi_ok ? 0 : -1;
}

static int set_string(napi_env env, napi_value object, const char *name, const char *value) {
  napi_value string;
  if (value == NULL) {
    if (napi_get_null(env, &string) != napi_ok) return -1;
  } else if (napi_create_string_utf8(env, value, NAPI_AUTO_LENGTH, &string) != napi_ok) {
    return -1;
  }
  return napi_set_named_property(env, object, name, string) == napi_ok ? 0 : -1;
}

static int set_bool(napi_env env, napi_value object, const char *name, int value) {
  napi_value boolean;
  if (napi_get_boolean(env, value != 0, &boolean) != napi_ok) return -1;
  return napi_set_named_property(env, object, name, boolean) == napi_ok ? 0 : -1;
}

static int read_fd_argument(napi_env env, napi_callback_info info, int *fd) {
  size_t argc = 1;
  napi_value argv[1];
  napi_valuetype type;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return -1;
  if (argc < 1 || napi_typeof(env, argv[0], &type) != napi_ok || type != napi_number) {
    napi_throw_type_error(env, NULL, "expected a file descriptor (a number)");
    return -1;
  }
  return napi_get_value_int32(env, argv[0], fd) == napi_ok ? 0 : -1;
}

/**
 * {user, pid, mnt} of /proc/<which>/ns: "dev:ino" strings, null where stat failed. A namespace this
 * process may not inspect (EACCES, EPERM: the other process is more privileged) sets *denied; any
 * other failure fills `unreadable` ("/proc/42/ns/mnt: No such file or directory").
 */
static napi_value namespaces_of(napi_env env, const char *which, int *denied, char *unreadable, size_t unreadable_size) {
  napi_value object;
  CHECK(napi_create_object(env, &object));
  for (int index = 0; index < NAMESPACE_COUNT; index++) {
    char path[64];
    char identity[64];
    struct stat info;
    snprintf(path, sizeof path, "/proc/%s/ns/%s", which, NAMESPACES[index]);
    if (stat(path, &info) == 0) {
      snprintf(identity, sizeof identity, "%llu:%llu", (unsigned long long)info.st_dev, (unsigned long long)info.st_ino);
      if (set_string(env, object, NAMESPACES[index], identity) != 0) return NULL;
      continue;
    }
    if ((errno == EACCES || errno == EPERM) && denied != NULL) *denied = 1;
    else if (unreadable[0] == '\0') snprintf(unreadable, unreadable_size, "%s: %s", path, strerror(errno));
    if (set_string(env, object, NAMESPACES[index], NULL) != 0) return NULL;
  }
  return object;
}

/** Reads at most size-1 bytes of a small file and ends them with a NUL; -1 (errno set) on failure. */
static ssize_t read_small(const char *path, char *buffer, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t total = 0;
  while ((size_t)total < size - 1) {
    ssize_t got = read(fd, buffer + total, size - 1 - (size_t)total);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int saved = errno;
      close(fd);
      errno = saved;
      return -1;
    }
    if (got == 0) break;
    total += got;
  }
  close(fd);
  buffer[total] = '\0';
  return total;
}

/**
 * What any process may read about another when /proc/<pid>/ns is closed to it (a daemon that is
 * not root, a root caller): {pidDepth, mountId, uidMap}. pidDepth is how many pid namespaces deep
 * the process is (NSpid's entries), mountId the id of the first mount it sees (a new mount
 * namespace copies every mount under new ids), uidMap its uid_map as this process reads it.
 */
static napi_value visible_facts(napi_env env, const char *which, char *unreadable, size_t unreadable_size) {
  char path[64];
  char buffer[4096];
  const char *line;
  int64_t depth = 0;
  char *end = NULL;
  long long mount_id;
  napi_value object;
  CHECK(napi_create_object(env, &object));

  snprintf(path, sizeof path, "/proc/%s/status", which);
  if (read_small(path, buffer, sizeof buffer) < 0) goto failed;
  line = strstr(buffer, "\nNSpid:");
  if (line != NULL) {
    for (const char *cursor = line + 7; *cursor != '\0' && *cursor != '\n';) {
      while (*cursor == ' ' || *cursor == '\t') cursor++;
      if (*cursor >= '0' && *cursor <= '9') depth++;
      while (*cursor != '\0' && *cursor != '\n' && *cursor != ' ' && *cursor != '\t') cursor++;
    }
  }
  if (depth == 0) {
    errno = ENOTSUP;
    goto failed;
  }
  if (set_int(env, object, "pidDepth", depth) != 0) return NULL;

  snprintf(path, sizeof path, "/proc/%s/mountinfo", which);
  if (read_small(path, buffer, 64) < 0) goto failed;
  mount_id = strtoll(buffer, &end, 10);
  if (end == buffer) {
    errno = ENOTSUP;
    goto failed;
  }
  if (set_int(env, object, "mountId", mount_id) != 0) return NULL;

  snprintf(path, sizeof path, "/proc/%s/uid_map", which);
  if (read_small(path, buffer, sizeof buffer) < 0) goto failed;
  if (set_string(env, object, "uidMap", buffer) != 0) return NULL;
  return object;

failed:
  snprintf(unreadable, unreadable_size, "%s: %s", path, strerror(errno));
  napi_get_null(env, &object);
  return object;
}

/**
 * inspect(fd) -> {pid, uid, gid, pinning, alive, namespaces, visible, unreadable}
 * pinning: "SO_PEERPIDFD" | "pidfd_open" | "none"; alive: the pinned process still existed after
 * everything about it was read. namespaces: {user, pid, mnt} or null (pid 0, or gone first);
 * visible: the facts of visible_facts(), read only when its namespaces were closed to this
 * process, else null. unreadable: what could not be read. Throws when SO_PEERCRED fails.
 */
static napi_value inspect(napi_env env, napi_callback_info info) {
  int fd;
  if (read_fd_argument(env, info, &fd) != 0) return NULL;
  struct ucred peer;
  socklen_t length = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) return throw_errno(env, "getsockopt(SO_PEERCRED)", errno);

  napi_value result;
  CHECK(napi_create_object(env, &result));
  if (set_int(env, result, "pid", peer.pid) || set_int(env, result, "uid", peer.uid) || set_int(env, result, "gid", peer.gid)) return NULL;

  const char *pinning = "none";
  int alive = 0;
  napi_value namespaces = NULL;
  napi_value visible = NULL;
  char unreadable[160] = "";
  if (peer.pid > 0) {
    int pidfd = -1;
    length = sizeof pidfd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) == 0) {
      pinning = "SO_PEERPIDFD";
    } else if (errno == ENOPROTOOPT) {
      // A kernel before 6.5. Any other failure means the peer is gone (EINVAL: it has no task).
      pidfd = (int)syscall(SYS_pidfd_open, peer.pid, 0);
      if (pidfd >= 0) pinning = "pidfd_open";
      else if (errno != ENOSYS) snprintf(unreadable, sizeof unreadable, "pidfd_open: %s", strerror(errno));
    } else {
      pidfd = -1;
      snprintf(unreadable, sizeof unreadable, "getsockopt(SO_PEERPIDFD): %s", strerror(errno));
    }
    if (unreadable[0] == '\0') {
      char which[24];
      int denied = 0;
      snprintf(which, sizeof which, "%d", (int)peer.pid);
      namespaces = namespaces_of(env, which, &denied, unreadable, sizeof unreadable);
      if (namespaces != NULL && denied && unreadable[0] == '\0') visible = visible_facts(env, which, unreadable, sizeof unreadable);
      if (namespaces == NULL || (denied && visible == NULL)) {
        if (pidfd >= 0) close(pidfd);
        return NULL;
      }
      // Signal 0 only asks whether the process exists; EPERM still says it does.
      if (pidfd >= 0) alive = syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM;
      else alive = kill(peer.pid, 0) == 0 || errno == EPERM;
    }
    if (pidfd >= 0) close(pidfd);
  }
  if (namespaces == NULL) CHECK(napi_get_null(env, &namespaces));
  if (visible == NULL) CHECK(napi_get_null(env, &visible));
  CHECK(napi_set_named_property(env, result, "namespaces", namespaces));
  CHECK(napi_set_named_property(env, result, "visible", visible));
  if (set_string(env, result, "pinning", pinning) || set_bool(env, result, "alive", alive)) return NULL;
  if (set_string(env, result, "unreadable", unreadable[0] ? unreadable : NULL)) return NULL;
  return result;
}

/** ownNamespaces() -> {user, pid, mnt}: the daemon's own, as inspect() answers a peer's. Throws if unreadable. */
static napi_value own_namespaces(napi_env env, napi_callback_info info) {
  (void)info;
  char unreadable[160] = "";
  napi_value namespaces = namespaces_of(env, "self", NULL, unreadable, sizeof unreadable);
  if (namespaces == NULL) return NULL;
  if (unreadable[0] != '\0') {
    napi_throw_error(env, NULL, unreadable);
    return NULL;
  }
  return namespaces;
}

/** ownVisible() -> {pidDepth, mountId, uidMap}: the daemon's own, as inspect() answers a peer's. Throws if unreadable. */
static napi_value own_visible(napi_env env, napi_callback_info info) {
  (void)info;
  char unreadable[160] = "";
  napi_value facts = visible_facts(env, "self", unreadable, sizeof unreadable);
  if (facts == NULL) return NULL;
  if (unreadable[0] != '\0') {
    napi_throw_error(env, NULL, unreadable);
    return NULL;
  }
  return facts;
}

/** peerPidfdSupported() -> whether this kernel has SO_PEERPIDFD (it answers ENOPROTOOPT when not). */
static napi_value peer_pidfd_supported(napi_env env, napi_callback_info info) {
  (void)info;
  int pair[2];
  int supported = 0;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0) {
    int pidfd = -1;
    socklen_t length = sizeof pidfd;
    if (getsockopt(pair[0], SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) == 0) {
      supported = 1;
      close(pidfd);
    }
    close(pair[0]);
    close(pair[1]);
  }
  napi_value result;
  CHECK(napi_get_boolean(env, supported, &result));
  return result;
}

/**
 * The (dev, ino) of the inode a bound unix socket's path was made as, asked of the kernel by the
 * socket's own inode (one exact sock_diag lookup). 1 with the answer, 0 when the socket has no path
 * (unbound, abstract), -errno when the kernel could not be asked. The inode number comes as 32 bits.
 */
static int bound_path(int fd, uint64_t *dev, uint32_t *ino) {
  struct stat info;
  if (fstat(fd, &info) != 0) return -errno;
  if (!S_ISSOCK(info.st_mode)) return -ENOTSOCK;
  int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (diag < 0) return -errno;
  struct {
    struct nlmsghdr header;
    struct unix_diag_req request;
  } query = {
      .header = {.nlmsg_len = sizeof query, .nlmsg_type = SOCK_DIAG_BY_FAMILY, .nlmsg_flags = NLM_F_REQUEST},
      .request = {.sdiag_family = AF_UNIX, .udiag_states = (uint32_t)-1, .udiag_ino = (uint32_t)info.st_ino, .udiag_show = UDIAG_SHOW_VFS, .udiag_cookie = {~0U, ~0U}},
  };
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  if (sendto(diag, &query, sizeof query, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
    int error = errno;
    close(diag);
    return -error;
  }
  long buffer[2048 / sizeof(long)];
  ssize_t length;
  do length = recv(diag, buffer, sizeof buffer, 0);
  while (length < 0 && errno == EINTR);
  int error = length < 0 ? errno : 0;
  close(diag);
  if (error) return -error;
  int found = 0;
  for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, (size_t)length); header = NLMSG_NEXT(header, length)) {
    if (header->nlmsg_type == NLMSG_ERROR) {
      struct nlmsgerr *failure = NLMSG_DATA(header);
      return failure->error < 0 ? failure->error : -EPROTO;
    }
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY || header->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg))) continue;
    struct unix_diag_msg *message = NLMSG_DATA(header);
    if (message->udiag_ino != (uint32_t)info.st_ino) continue;
    struct rtattr *attribute = (struct rtattr *)(message + 1);
    int left = (int)(header->nlmsg_len - NLMSG_LENGTH(sizeof *message));
    for (; RTA_OK(attribute, left); attribute = RTA_NEXT(attribute, left)) {
      if (attribute->rta_type != UNIX_DIAG_VFS || RTA_PAYLOAD(attribute) < sizeof(struct unix_diag_vfs)) continue;
      struct unix_diag_vfs *vfs = RTA_DATA(attribute);
      // The kernel's own dev_t (major << 20 | minor), as stat(2) would encode it.
      *dev = makedev(vfs->udiag_vfs_dev >> 20, vfs->udiag_vfs_dev & 0xfffff);
      *ino = vfs->udiag_vfs_ino;
      found = 1;
    }
  }
  return found;
}

/** boundPath(fd) -> {dev, ino} of the inode the listening socket's path was made as, or null without one; throws when the kernel cannot be asked. */
static napi_value bound_path_of(napi_env env, napi_callback_info info) {
  int fd;
  if (read_fd_argument(env, info, &fd) != 0) return NULL;
  uint64_t dev = 0;
  uint32_t ino = 0;
  int answer = bound_path(fd, &dev, &ino);
  if (answer < 0) return throw_errno(env, "sock_diag (UNIX_DIAG_VFS)", -answer);
  napi_value result;
  if (answer == 0) {
    CHECK(napi_get_null(env, &result));
    return result;
  }
  CHECK(napi_create_object(env, &result));
  if (set_int(env, result, "dev", (int64_t)dev) != 0 || set_int(env, result, "ino", ino) != 0) return NULL;
  return result;
}

bool define_peer_credentials(napi_env env, napi_value part) {
  const napi_property_descriptor functions[] = {
      {"inspect", NULL, inspect, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ownNamespaces", NULL, own_namespaces, NULL, NULL, NULL, napi_enumerable, NULL},
      {"ownVisible", NULL, own_visible, NULL, NULL, NULL, napi_enumerable, NULL},
      {"peerPidfdSupported", NULL, peer_pidfd_supported, NULL, NULL, NULL, napi_enumerable, NULL},
      {"boundPath", NULL, bound_path_of, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  return define_functions(env, part, functions, sizeof functions / sizeof functions[0]);
}
