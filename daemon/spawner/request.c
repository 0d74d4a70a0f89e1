/* tend-spawner: parsing a framed request (the wire protocol: PROTOCOL.md). */
#define _GNU_SOURCE
#include <string.h>
#include <sys/resource.h>
#include "spawner.h"

struct cursor {
  char *at, *end;
};

static char *next_string(struct cursor *cursor, const char *what) {
  if (cursor->at >= cursor->end) malformed("truncated request: %s is missing", what);
  char *start = cursor->at;
  char *nul = memchr(start, 0, (size_t)(cursor->end - start));
  if (!nul) malformed("truncated request: %s is not NUL-terminated", what);
  cursor->at = nul + 1;
  return start;
}

static unsigned long long parse_number(const char *text, const char *what, unsigned long long max) {
  if (!*text) malformed("%s is empty", what);
  unsigned long long value = 0;
  for (const char *c = text; *c; c++) {
    if (*c < '0' || *c > '9') malformed("%s is not a decimal number", what);
    unsigned digit = (unsigned)(*c - '0');
    if (value > (max - digit) / 10) malformed("%s is too large", what);
    value = value * 10 + digit;
  }
  return value;
}

static unsigned long long next_number(struct cursor *cursor, const char *what, unsigned long long max) {
  return parse_number(next_string(cursor, what), what, max);
}

/* Two numbers that are both empty (returns 0) or both given (returns 1). */
static int next_optional_pair(struct cursor *cursor, const char *what, unsigned long long max, unsigned long long *first, unsigned long long *second) {
  const char *a = next_string(cursor, what), *b = next_string(cursor, what);
  if (!*a && !*b) return 0;
  *first = parse_number(a, what, max);
  *second = parse_number(b, what, max);
  return 1;
}

/* A count of strings: each takes at least one byte, so it cannot exceed what is left. */
static size_t next_count(struct cursor *cursor, const char *what) {
  return (size_t)next_number(cursor, what, (unsigned long long)(cursor->end - cursor->at));
}

static struct blob next_blob(struct cursor *cursor) {
  size_t length = (size_t)next_number(cursor, "data length", MAX_PAYLOAD);
  if (length > (size_t)(cursor->end - cursor->at)) malformed("truncated request: a blob is shorter than its length");
  struct blob blob = {cursor->at, length};
  cursor->at += length;
  return blob;
}

static void check_reqid(const char *reqid) {
  size_t reqid_length = strlen(reqid);
  if (reqid_length == 0 || reqid_length > MAX_REQID) malformed("reqid must be 1 to %d characters", MAX_REQID);
  for (const char *c = reqid; *c; c++)
    if (*c <= ' ' || *c > '~') malformed("reqid has a space or a control character");
}

/* "" or an absolute path short enough for the temporary file's name beside it. */
static const char *next_spool_path(struct cursor *cursor, const char *what) {
  const char *path = next_string(cursor, what);
  if (*path && path[0] != '/') malformed("%s is not absolute", what);
  if (strlen(path) > MAX_EXIT_PATH) malformed("%s is longer than %d bytes", what, MAX_EXIT_PATH);
  return path;
}

/* A pinned folder or a view: path, dev, ino, then its owner's uid and gid (both empty: not mapped). */
static void next_pin(struct cursor *cursor, struct pin *pin, const char *what, int set_user) {
  pin->path = next_string(cursor, what);
  if (pin->path[0] != '/') malformed("%s path is not absolute", what);
  pin->dev = next_number(cursor, what, ~0ULL);
  pin->ino = next_number(cursor, what, ~0ULL);
  pin->mapped = next_optional_pair(cursor, what, 0xfffffffeULL, &pin->owner_uid, &pin->owner_gid);
  pin->userns = -1;
  /* The mapping is onto the request's user: without one there is none to map to. */
  if (pin->mapped && !set_user) malformed("%s mapped to its owner without a user to map to", what);
}

/* The fields of a spawn from `file` on (reqid and exitFile are already in *request). */
static void parse_spawn(struct cursor cursor, struct request *request, void **allocation) {
  request->file = next_string(&cursor, "file");
  request->cwd = next_string(&cursor, "cwd");
  request->output = next_string(&cursor, "outputFile");
  request->open_files = next_number(&cursor, "openFiles", RLIM_INFINITY);
  request->file_size = next_number(&cursor, "fileSizeBytes", RLIM_INFINITY);
  request->check_cwd = next_optional_pair(&cursor, "cwd identity", ~0ULL, &request->cwd_dev, &request->cwd_ino);
  /* (uid_t)-1 means "unchanged" to setuid: never a user to run as. */
  request->set_user = next_optional_pair(&cursor, "user", 0xfffffffeULL, &request->uid, &request->gid);

  /* The counts come before their entries: parse in two passes into one allocation. */
  struct cursor scan = cursor;
  size_t argc = next_count(&scan, "argc");
  for (size_t i = 0; i < argc; i++) next_string(&scan, "argv");
  size_t envc = next_count(&scan, "envc");
  for (size_t i = 0; i < envc; i++) next_string(&scan, "env");
  size_t extrac = next_count(&scan, "extrac");
  for (size_t i = 0; i < extrac; i++) next_string(&scan, "extraFiles");
  size_t cgc = next_count(&scan, "cgc");
  for (size_t i = 0; i < 4 * cgc; i++) next_string(&scan, "cgroup");
  size_t pinc = next_count(&scan, "pinc");
  for (size_t i = 0; i < 5 * pinc; i++) next_string(&scan, "pinned folder");
  size_t viewc = next_count(&scan, "viewc");
  for (size_t i = 0; i < 5 * viewc; i++) next_string(&scan, "view");
  size_t hiddenc = next_count(&scan, "hiddenc");
  for (size_t i = 0; i < hiddenc; i++) next_string(&scan, "hidden");
  size_t datac = next_count(&scan, "datac");
  for (size_t i = 0; i < datac; i++) next_blob(&scan);
  size_t coverc = next_count(&scan, "coverc");
  for (size_t i = 0; i < coverc; i++) {
    next_string(&scan, "cover");
    next_blob(&scan);
  }
  for (int i = 0; i < 3; i++) next_string(&scan, "netns");
  if (scan.at != scan.end) malformed("request has %zu trailing bytes", (size_t)(scan.end - scan.at));
  if (extrac + pinc + datac > MAX_DESCRIPTORS) malformed("too many extra files, blobs and pinned folders");
  if (viewc > MAX_VIEWS) malformed("too many views");
  if (coverc > MAX_COVERS) malformed("too many covered files");

  /* Pointers first, then the structs, then the ints: each part stays aligned. */
  size_t pointers = (argc + 1) + (envc + 1) + extrac + hiddenc;
  size_t slots = extrac + datac + pinc;
  size_t ints = slots + viewc + pinc + viewc;
  char **table = xrealloc(NULL, pointers * sizeof(char *) + cgc * sizeof(struct cgroup_join) + (pinc + viewc) * sizeof(struct pin) + datac * sizeof(struct blob) + coverc * sizeof(struct cover) + ints * sizeof(int) + 1);
  *allocation = table;
  request->argc = argc;
  request->envc = envc;
  request->extrac = extrac;
  request->cgc = cgc;
  request->pinc = pinc;
  request->viewc = viewc;
  request->hiddenc = hiddenc;
  request->datac = datac;
  request->coverc = coverc;
  request->argv = table;
  request->envp = request->argv + argc + 1;
  request->extra = request->envp + envc + 1;
  request->hidden = request->extra + extrac;
  request->cgroups = (struct cgroup_join *)(void *)(request->hidden + hiddenc);
  request->pins = (struct pin *)(void *)(request->cgroups + cgc);
  request->views = request->pins + pinc;
  request->data = (struct blob *)(void *)(request->views + viewc);
  request->covers = (struct cover *)(void *)(request->data + datac);
  request->fds = (int *)(void *)(request->covers + coverc);
  request->view_fds = request->fds + slots;
  request->userns_fds = request->view_fds + viewc;
  request->usernsc = 0;

  next_string(&cursor, "argc");
  for (size_t i = 0; i < argc; i++) request->argv[i] = next_string(&cursor, "argv");
  request->argv[argc] = NULL;
  next_string(&cursor, "envc");
  for (size_t i = 0; i < envc; i++) request->envp[i] = next_string(&cursor, "env");
  request->envp[envc] = NULL;
  next_string(&cursor, "extrac");
  for (size_t i = 0; i < extrac; i++) request->extra[i] = next_string(&cursor, "extraFiles");
  next_string(&cursor, "cgc");
  for (size_t i = 0; i < cgc; i++) {
    struct cgroup_join *group = &request->cgroups[i];
    group->path = next_string(&cursor, "cgroup path");
    if (group->path[0] != '/') malformed("cgroup path is not absolute");
    group->dev = next_number(&cursor, "cgroup dev", ~0ULL);
    group->ino = next_number(&cursor, "cgroup ino", ~0ULL);
    group->uid = next_number(&cursor, "cgroup uid", 0xfffffffeULL);
  }
  next_string(&cursor, "pinc");
  for (size_t i = 0; i < pinc; i++) next_pin(&cursor, &request->pins[i], "pinned", request->set_user);
  next_string(&cursor, "viewc");
  for (size_t i = 0; i < viewc; i++) {
    next_pin(&cursor, &request->views[i], "view", request->set_user);
    if (!request->views[i].mapped) malformed("a view without its owner");
  }
  next_string(&cursor, "hiddenc");
  for (size_t i = 0; i < hiddenc; i++) {
    request->hidden[i] = next_string(&cursor, "hidden");
    if (request->hidden[i][0] != '/') malformed("hidden path is not absolute");
  }
  next_string(&cursor, "datac");
  for (size_t i = 0; i < datac; i++) request->data[i] = next_blob(&cursor);
  next_string(&cursor, "coverc");
  for (size_t i = 0; i < coverc; i++) {
    request->covers[i].path = next_string(&cursor, "cover");
    if (request->covers[i].path[0] != '/') malformed("covered path is not absolute");
    request->covers[i].data = next_blob(&cursor);
  }
  /* The network namespace to join: all three empty for none. */
  request->netns = next_string(&cursor, "netns");
  request->netns_dev = request->netns_ino = 0;
  if (*request->netns) {
    if (request->netns[0] != '/') malformed("netns path is not absolute");
    request->netns_dev = next_number(&cursor, "netns dev", ~0ULL);
    request->netns_ino = next_number(&cursor, "netns ino", ~0ULL);
  } else if (*next_string(&cursor, "netns dev") || *next_string(&cursor, "netns ino")) {
    malformed("netns identity without its path");
  }
}

static void parse_attach(struct cursor cursor, struct attach *attach) {
  attach->reqid = next_string(&cursor, "reqid");
  check_reqid(attach->reqid);
  /* pid_t is an int: pids run from 1 to 2^22 on Linux, any positive int is carried. */
  attach->keeper = (pid_t)next_number(&cursor, "keeperPid", 0x7fffffffULL);
  attach->keeper_start = next_number(&cursor, "keeperStart", ~0ULL);
  attach->task = (pid_t)next_number(&cursor, "taskPid", 0x7fffffffULL);
  if (attach->keeper == 0 || attach->task == 0) malformed("a pid of 0 in an attach request");
  if (cursor.at != cursor.end) malformed("attach request has %zu trailing bytes", (size_t)(cursor.end - cursor.at));
}

/* A FIFO's path when its flag is set, else "" (and it must be empty). */
static const char *next_fifo(struct cursor *cursor, const char *what, int wanted) {
  const char *path = next_spool_path(cursor, what);
  if (wanted && !*path) malformed("%s is empty", what);
  if (!wanted && *path) malformed("%s given without its flag", what);
  return path;
}

/* The header of a spawn (PROTOCOL.md): version, flags, reqid, exitFile, stdinFifo, resizeFifo, cols, rows, setupWaitMs. */
static void parse_spawn_header(struct cursor *cursor, struct request *spawn) {
  unsigned long long version = next_number(cursor, "version", ~0ULL);
  if (version != PROTOCOL_VERSION) malformed("protocol version %llu is not %d", version, PROTOCOL_VERSION);
  unsigned long long flags = next_number(cursor, "flags", ~0ULL);
  if (flags & ~(unsigned long long)SPAWN_FLAGS) malformed("unknown flags %llu", flags);
  if ((flags & SPAWN_TTY) && !(flags & SPAWN_STDIN)) malformed("a terminal without a stdinFifo");
  spawn->reqid = next_string(cursor, "reqid");
  check_reqid(spawn->reqid);
  spawn->exit_file = next_spool_path(cursor, "exitFile");
  spawn->stdin_fifo = next_fifo(cursor, "stdinFifo", (flags & SPAWN_STDIN) != 0);
  spawn->tty = (flags & SPAWN_TTY) != 0;
  spawn->resize_fifo = next_fifo(cursor, "resizeFifo", spawn->tty);
  /* struct winsize holds unsigned shorts. */
  spawn->cols = (unsigned)next_number(cursor, "cols", 65535);
  spawn->rows = (unsigned)next_number(cursor, "rows", 65535);
  if (spawn->tty && (!spawn->cols || !spawn->rows)) malformed("a terminal of 0 columns or rows");
  if (!spawn->tty && (spawn->cols || spawn->rows)) malformed("a terminal size without a terminal");
  spawn->lifeline = (flags & SPAWN_LIFELINE) != 0;
  spawn->reports_setup = (flags & SPAWN_SETUP) != 0;
  spawn->setup_fd = -1;
  spawn->setup_wait_ms = next_number(cursor, "setupWaitMs", MAX_SETUP_WAIT_MS);
  if (spawn->reports_setup && !spawn->setup_wait_ms) malformed("a setup report without a setupWaitMs");
  if (!spawn->reports_setup && spawn->setup_wait_ms) malformed("a setupWaitMs without a setup report");
}

enum request_kind parse_request(char *payload, size_t length, struct request *spawn, struct attach *attach, void **allocation) {
  struct cursor cursor = {payload, payload + length};
  const char *kind = next_string(&cursor, "request kind");
  *allocation = NULL;
  if (strcmp(kind, "attach") == 0) {
    parse_attach(cursor, attach);
    return REQUEST_ATTACH;
  }
  if (strcmp(kind, "spawn") != 0) malformed("unknown request kind");
  parse_spawn_header(&cursor, spawn);
  parse_spawn(cursor, spawn, allocation);
  return REQUEST_SPAWN;
}
