// An LD_PRELOAD library that makes file system calls fail on purpose, so tests can show what the
// store does on a full disk, a read-only file system or an I/O error without root (Linux only).
//
// Controlled by the environment (read once, at load):
//   MIRA_FAULT_PATH   required: a call fails only when its path (for a descriptor: the path it
//                     was opened as, from /proc/self/fd) contains this substring
//   MIRA_FAULT_ERRNO  ENOSPC (default), EROFS or EIO
//   MIRA_FAULT_OP     a comma-separated list of write, pwrite, writev, fsync, fdatasync, syncfs
//                     (the per-case layout's flush), rename (matched on the new name), create
//                     (open with O_CREAT), mkdir; default: all of them
//   MIRA_FAULT_AFTER  N matching calls succeed first (default 0); every later one fails
//   MIRA_FAULT_LOG    a file that gets one line "OP PATH ERRNO" per call made to fail
//   MIRA_FAULT_DELAY_MS  a slow disk instead of a failing one: a matching call waits this long,
//                     then is made
// A call is matched before it is made, so a failed write writes nothing.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum op {
  op_write,
  op_pwrite,
  op_writev,
  op_fsync,
  op_fdatasync,
  op_syncfs,
  op_rename,
  op_create,
  op_mkdir
};

static const char* const op_names[] = {"write",  "pwrite", "writev", "fsync", "fdatasync",
                                       "syncfs", "rename", "create", "mkdir"};

static struct {
  int active;
  int error;
  unsigned ops;  // bit per enum op
  long after;
  const char* path;
  const char* log;
  atomic_long seen;  // matching calls so far, over every op
  long delay_ms;     // > 0: matching calls are slowed, not failed
} cfg;

static int parse_errno(const char* s) {
  if (!s || !*s || strcmp(s, "ENOSPC") == 0) return ENOSPC;
  if (strcmp(s, "EROFS") == 0) return EROFS;
  if (strcmp(s, "EIO") == 0) return EIO;
  return ENOSPC;
}

__attribute__((constructor)) static void fault_init(void) {
  cfg.path = getenv("MIRA_FAULT_PATH");
  if (!cfg.path || !*cfg.path) return;
  cfg.error = parse_errno(getenv("MIRA_FAULT_ERRNO"));
  const char* after = getenv("MIRA_FAULT_AFTER");
  cfg.after = after ? atol(after) : 0;
  cfg.log = getenv("MIRA_FAULT_LOG");
  const char* delay = getenv("MIRA_FAULT_DELAY_MS");
  cfg.delay_ms = delay ? atol(delay) : 0;
  const char* ops = getenv("MIRA_FAULT_OP");
  if (!ops || !*ops) {
    cfg.ops = ~0u;
  } else {
    for (unsigned i = 0; i < sizeof op_names / sizeof op_names[0]; ++i) {
      size_t n = strlen(op_names[i]);
      for (const char* p = ops; (p = strstr(p, op_names[i])) != NULL; p += n)
        if ((p == ops || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) cfg.ops |= 1u << i;
    }
  }
  cfg.active = 1;
}

static void* real(const char* name) {
  return dlsym(RTLD_NEXT, name);
}

static void log_fault(enum op o, const char* path) {
  if (!cfg.log) return;
  static int (*real_open)(const char*, int, ...);
  static ssize_t (*real_write)(int, const void*, size_t);
  if (!real_open) real_open = real("open");
  if (!real_write) real_write = real("write");
  int fd = real_open(cfg.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[4200];
  int n = snprintf(line, sizeof line, "%s %s %s\n", op_names[o], path, strerror(cfg.error));
  if (n > 0) real_write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  close(fd);
}

// True (errno set) when this call must fail.
static int fault_path(enum op o, const char* path) {
  if (!cfg.active || !(cfg.ops & (1u << o)) || !path || !strstr(path, cfg.path)) return 0;
  if (atomic_fetch_add(&cfg.seen, 1) < cfg.after) return 0;
  if (cfg.delay_ms > 0) {
    struct timespec t = {cfg.delay_ms / 1000, (cfg.delay_ms % 1000) * 1000000L};
    int saved = errno;
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
    errno = saved;
    return 0;
  }
  log_fault(o, path);
  errno = cfg.error;
  return 1;
}

static int fault_fd(enum op o, int fd) {
  if (!cfg.active || !(cfg.ops & (1u << o))) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  int saved = errno;
  ssize_t n = readlink(link, path, sizeof path - 1);
  errno = saved;
  if (n <= 0) return 0;
  path[n] = '\0';
  return fault_path(o, path);
}

// For the *at calls: `path` as the whole path it names (the directory descriptor's path, then
// `path`), since the store opens the files of a run folder relative to its descriptors.
static int fault_at(enum op o, int dir, const char* path) {
  if (!cfg.active || !(cfg.ops & (1u << o)) || !path) return 0;
  if (dir == AT_FDCWD || path[0] == '/') return fault_path(o, path);
  char link[64], full[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", dir);
  int saved = errno;
  ssize_t n = readlink(link, full, sizeof full - 1);
  errno = saved;
  if (n <= 0) return fault_path(o, path);
  snprintf(full + n, sizeof full - (size_t)n, "/%s", path);
  return fault_path(o, full);
}

ssize_t write(int fd, const void* buf, size_t n) {
  static ssize_t (*next)(int, const void*, size_t);
  if (!next) next = real("write");
  if (fault_fd(op_write, fd)) return -1;
  return next(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
  static ssize_t (*next)(int, const void*, size_t, off_t);
  if (!next) next = real("pwrite");
  if (fault_fd(op_pwrite, fd)) return -1;
  return next(fd, buf, n, at);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off_t at) {
  static ssize_t (*next)(int, const void*, size_t, off_t);
  if (!next) next = real("pwrite64");
  if (fault_fd(op_pwrite, fd)) return -1;
  return next(fd, buf, n, at);
}

ssize_t writev(int fd, const struct iovec* iov, int count) {
  static ssize_t (*next)(int, const struct iovec*, int);
  if (!next) next = real("writev");
  if (fault_fd(op_writev, fd)) return -1;
  return next(fd, iov, count);
}

int fsync(int fd) {
  static int (*next)(int);
  if (!next) next = real("fsync");
  if (fault_fd(op_fsync, fd)) return -1;
  return next(fd);
}

int fdatasync(int fd) {
  static int (*next)(int);
  if (!next) next = real("fdatasync");
  if (fault_fd(op_fdatasync, fd)) return -1;
  return next(fd);
}

int syncfs(int fd) {
  static int (*next)(int);
  if (!next) next = real("syncfs");
  if (fault_fd(op_syncfs, fd)) return -1;
  return next(fd);
}

int rename(const char* from, const char* to) {
  static int (*next)(const char*, const char*);
  if (!next) next = real("rename");
  if (fault_path(op_rename, to)) return -1;
  return next(from, to);
}

int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  static int (*next)(int, const char*, int, const char*);
  if (!next) next = real("renameat");
  if (fault_at(op_rename, to_dir, to)) return -1;
  return next(from_dir, from, to_dir, to);
}

int mkdir(const char* path, mode_t mode) {
  static int (*next)(const char*, mode_t);
  if (!next) next = real("mkdir");
  if (fault_path(op_mkdir, path)) return -1;
  return next(path, mode);
}

int mkdirat(int dir, const char* path, mode_t mode) {
  static int (*next)(int, const char*, mode_t);
  if (!next) next = real("mkdirat");
  if (fault_at(op_mkdir, dir, path)) return -1;
  return next(dir, path, mode);
}

// The open family: only a call that may create a file (O_CREAT) is a "create".
#define MIRA_FAULT_OPEN(name)                                 \
  int name(const char* path, int flags, ...) {                \
    static int (*next)(const char*, int, ...);                \
    if (!next) next = real(#name);                            \
    mode_t mode = 0;                                          \
    if (flags & (O_CREAT | __O_TMPFILE)) {                    \
      va_list ap;                                             \
      va_start(ap, flags);                                    \
      mode = va_arg(ap, mode_t);                              \
      va_end(ap);                                             \
    }                                                         \
    if ((flags & O_CREAT) && fault_path(op_create, path))     \
      return -1;                                              \
    return next(path, flags, mode);                           \
  }
MIRA_FAULT_OPEN(open)
MIRA_FAULT_OPEN(open64)

#define MIRA_FAULT_OPENAT(name)                               \
  int name(int dir, const char* path, int flags, ...) {       \
    static int (*next)(int, const char*, int, ...);           \
    if (!next) next = real(#name);                            \
    mode_t mode = 0;                                          \
    if (flags & (O_CREAT | __O_TMPFILE)) {                    \
      va_list ap;                                             \
      va_start(ap, flags);                                    \
      mode = va_arg(ap, mode_t);                              \
      va_end(ap);                                             \
    }                                                         \
    if ((flags & O_CREAT) && fault_at(op_create, dir, path))  \
      return -1;                                              \
    return next(dir, path, flags, mode);                      \
  }
MIRA_FAULT_OPENAT(openat)
MIRA_FAULT_OPENAT(openat64)
