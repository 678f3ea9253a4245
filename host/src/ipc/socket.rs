//! A connected-message (`SOCK_SEQPACKET`) Unix-domain socket that carries
//! file descriptors: the only `unsafe` of the rendezvous lives here.
//!
//! `SOCK_SEQPACKET` keeps message boundaries (one frame per `recvmsg`,
//! never split or merged, its descriptors attached to it) and reports a
//! peer's death as end-of-file, which the protocol turns into
//! [`MemberLost`](super::RendezvousError::MemberLost).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use super::frame::{Frame, FRAME_BYTES};

/// Most descriptors one frame carries (well under the kernel's 253).
pub(super) const MAX_FDS_PER_FRAME: usize = 16;

/// A `sockaddr_un` for `path`, or `None` if it does not fit.
fn address(path: &Path) -> Option<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: `sockaddr_un` is plain old data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    // One byte is kept for the terminating NUL.
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return None;
    }
    for (dst, &src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Some((addr, len as libc::socklen_t))
}

/// The longest socket path `sockaddr_un` holds, in bytes.
pub(super) fn max_path_len() -> usize {
    // SAFETY: as in `address`.
    let addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_path.len() - 1
}

fn new_socket() -> io::Result<OwnedFd> {
    // SAFETY: `socket` takes plain integers and returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn path_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "socket path does not fit sockaddr_un",
    )
}

/// The signature `bind` and `connect` share.
type AddressCall =
    unsafe extern "C" fn(libc::c_int, *const libc::sockaddr, libc::socklen_t) -> libc::c_int;

/// A new socket on which `call` (`bind` or `connect`) was made with `path`.
fn socket_at(path: &Path, call: AddressCall) -> io::Result<OwnedFd> {
    let (addr, len) = address(path).ok_or_else(path_error)?;
    let fd = new_socket()?;
    // SAFETY: `addr` is a valid `sockaddr_un` of `len` bytes and `fd` a
    // live socket; `call` is `bind` or `connect`, which read only those.
    let rc = unsafe {
        call(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// A bound, listening socket.
pub(super) struct Listener {
    fd: OwnedFd,
}

impl Listener {
    /// Binds `path` and listens. `EADDRINUSE` is returned as is: the caller
    /// tells a live listener from a stale file.
    pub fn bind(path: &Path, backlog: u32) -> io::Result<Listener> {
        let fd = socket_at(path, libc::bind)?;
        // SAFETY: plain integers on a descriptor this function owns.
        if unsafe { libc::listen(fd.as_raw_fd(), backlog.min(128) as i32) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Listener { fd })
    }

    /// Accepts one pending connection.
    pub fn accept(&self) -> io::Result<Conn> {
        // SAFETY: null address arguments are allowed; returns a new
        // descriptor or -1.
        let fd = unsafe {
            libc::accept4(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor this function owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Conn { fd })
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// One connected socket.
pub(super) struct Conn {
    fd: OwnedFd,
}

impl Conn {
    /// Connects to the listener at `path` (one attempt).
    pub fn connect(path: &Path) -> io::Result<Conn> {
        Ok(Conn {
            fd: socket_at(path, libc::connect)?,
        })
    }

    /// Sends `frame` with `fds` attached. A peer that is gone is
    /// `BrokenPipe` (never `SIGPIPE`).
    pub fn send(&self, frame: &Frame, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        if fds.len() > MAX_FDS_PER_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "too many descriptors for one frame",
            ));
        }
        let bytes = frame.encode();
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let payload = std::mem::size_of_val(raw.as_slice()) as u32;
        // A u64 buffer keeps the control message aligned for `cmsghdr`.
        // SAFETY: `CMSG_SPACE` is arithmetic on its argument.
        let space = unsafe { libc::CMSG_SPACE(payload) } as usize;
        let mut control = vec![0u64; space.div_ceil(8).max(1)];
        // SAFETY: `msghdr` is plain old data; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !raw.is_empty() {
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            // SAFETY: `msg_control` points at `space` bytes, enough for one
            // header and `raw.len()` descriptors (`CMSG_SPACE`), so the
            // first header and its data are in bounds.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as _;
                std::ptr::copy_nonoverlapping(
                    raw.as_ptr(),
                    libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                    raw.len(),
                );
            }
        }
        // SAFETY: `msg` points at live buffers (`bytes`, `control`) for the call.
        let n = unsafe { libc::sendmsg(self.fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != FRAME_BYTES {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short send"));
        }
        Ok(())
    }

    /// Receives one message: `None` at end-of-file (the peer closed or
    /// died), else its bytes and the descriptors that came with it (owned:
    /// closed on drop, close-on-exec).
    pub fn recv(&self) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
        let mut bytes = [0u8; FRAME_BYTES * 2];
        let mut iov = libc::iovec {
            iov_base: bytes.as_mut_ptr().cast(),
            iov_len: bytes.len(),
        };
        let most = (MAX_FDS_PER_FRAME * std::mem::size_of::<RawFd>()) as u32;
        // SAFETY: arithmetic on its argument.
        let space = unsafe { libc::CMSG_SPACE(most) } as usize;
        let mut control = vec![0u64; space.div_ceil(8)];
        // SAFETY: `msghdr` is plain old data; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: `msg` points at live buffers (`bytes`, `control`) for the call.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fds = Vec::new();
        // SAFETY: the kernel filled `msg_controllen` bytes of `control` with
        // well-formed control messages; each SCM_RIGHTS payload is an array
        // of descriptors now owned by this process, taken exactly once.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                    let header = libc::CMSG_LEN(0) as usize;
                    let count = ((*cmsg).cmsg_len as usize - header) / std::mem::size_of::<RawFd>();
                    for i in 0..count {
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "descriptors were cut off (more than a frame may carry)",
            ));
        }
        if n == 0 && fds.is_empty() {
            return Ok(None);
        }
        Ok(Some((bytes[..n as usize].to_vec(), fds)))
    }
}

impl AsFd for Conn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Waits until one of `fds` is readable (or hung up), at most `timeout`;
/// returns which are (`revents != 0`). An interrupted wait returns no fd.
pub(super) fn poll_readable(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut set: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `set` is a live array of `set.len()` pollfds.
    let rc = unsafe { libc::poll(set.as_mut_ptr(), set.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(set.iter().map(|p| p.revents != 0).collect())
}
