// Bounded reading of input files (input_file.hpp; docs/hardening.md "Inputs").
#include "mgt/ir/input_limits.hpp"

#include "mgt/ir/error.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace mgt::ir {

namespace {

/// "a FIFO", "a character device", ... for a path that is not a regular file.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

const char* kLimitHint =
    "mgt inputs are JSON or MLIR text of a few MB; pass --max-input-mib <MiB> or set MGT_MAX_INPUT_BYTES=<bytes> to "
    "raise the limit";

/// Closes the descriptor at scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

int64_t max_input_bytes() {
  const char* text = std::getenv("MGT_MAX_INPUT_BYTES");
  if (text == nullptr || *text == '\0') return kDefaultMaxInputBytes;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v <= 0)
    throw InputError("environment", "MGT_MAX_INPUT_BYTES", "must be a positive integer of bytes, got \"" + std::string(text) + "\"",
                     "unset it for the 64 MiB default");
  return int64_t(v);
}

// 1. stat: a directory or a regular file over the limit is refused before opening;
// 2. open non-blocking, so that a FIFO without a writer does not block the open;
// 3. read in chunks; a FIFO that has no data yet is waited for with poll() until the deadline; the
//    end is read() == 0 on a regular file or a device, and on a FIFO once a writer came and went
//    (POLLHUP) or after some data;
// 4. more than the limit, or past the deadline, is an error naming the file.
std::string read_input_file(const std::string& path) {
  const int64_t limit = max_input_bytes();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(path, "", std::string("cannot open file: ") + std::strerror(errno), "check the path");
  if (S_ISDIR(st.st_mode)) throw InputError(path, "", "is a directory, not a file", "pass the file itself, not its folder");
  const bool regular = S_ISREG(st.st_mode);
  if (regular && int64_t(st.st_size) > limit)
    throw InputError(path, "", "is " + std::to_string(st.st_size) + " bytes, more than the input limit of " +
                                   std::to_string(limit) + " bytes",
                     kLimitHint);
  Fd file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (file.fd < 0) throw InputError(path, "", std::string("cannot open file: ") + std::strerror(errno), "check the path");
  const bool pipe = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kInputPipeDeadlineSeconds);
  std::string text;
  bool writer_left = false;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(file.fd, chunk, sizeof chunk);
    if (got > 0) {
      if (int64_t(text.size()) + got > limit)
        throw InputError(path, "", "is " + kind_of(st.st_mode) + " that gave more than the input limit of " +
                                       std::to_string(limit) + " bytes",
                         kLimitHint);
      text.append(chunk, size_t(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      throw InputError(path, "", std::string("cannot read file: ") + std::strerror(errno),
                       regular ? "check the disk" : "pass a regular file");
    if (got == 0 && (!pipe || writer_left || !text.empty())) break;
    // A FIFO with no writer yet, or a writer that has not written: wait for it, up to the deadline.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{file.fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) == 0)
      throw InputError(path, "", "is " + kind_of(st.st_mode) + " that did not deliver its data within " +
                                     std::to_string(int(kInputPipeDeadlineSeconds)) + " s",
                       "pass a regular file, or start the writer first");
    if (p.revents & POLLHUP) writer_left = true;
  }
  if (!regular && text.empty())
    throw InputError(path, "", "is " + kind_of(st.st_mode) + ", not a regular file, and gave no data", "pass a regular file");
  return text;
}

}  // namespace mgt::ir
