//! Classic BPF (cBPF) programs for `SO_REUSEPORT` groups: the instruction encoding
//! (linux/filter.h, linux/bpf_common.h), a label assembler, and the attach call. A group's
//! program picks, for each datagram, the socket that receives it (the kernel numbers a group's
//! sockets in the order they joined it). `socket2` has no `SO_ATTACH_REUSEPORT_CBPF`, and no
//! well-kept crate assembles cBPF with labels, so both are here (used by the translator's
//! priority sockets and the INT sink's flow steering).

#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;

// Classic BPF encoding (linux/filter.h, linux/bpf_common.h).
/// Instruction class: load into A.
pub const LD: u16 = 0x00;
/// Instruction class: load into X.
pub const LDX: u16 = 0x01;
/// Instruction class: store A into scratch memory.
pub const ST: u16 = 0x02;
/// Instruction class: store X into scratch memory.
pub const STX: u16 = 0x03;
/// Instruction class: arithmetic on A.
pub const ALU: u16 = 0x04;
/// Instruction class: jump.
pub const JMP: u16 = 0x05;
/// Instruction class: return.
pub const RET: u16 = 0x06;
/// Instruction class: register transfers.
pub const MISC: u16 = 0x07;
/// Size: 32-bit word.
pub const W: u16 = 0x00;
/// Size: 16-bit half word.
pub const H: u16 = 0x08;
/// Size: byte.
pub const B: u16 = 0x10;
/// Mode: the constant k.
pub const IMM: u16 = 0x00;
/// Mode: the packet at offset k.
pub const ABS: u16 = 0x20;
/// Mode: the packet at offset X + k.
pub const IND: u16 = 0x40;
/// Mode: scratch word k.
pub const MEM: u16 = 0x60;
/// Mode: the packet's length.
pub const LEN: u16 = 0x80;
/// ALU: add.
pub const ADD: u16 = 0x00;
/// ALU: subtract.
pub const SUB: u16 = 0x10;
/// ALU: multiply.
pub const MUL: u16 = 0x20;
/// ALU: and.
pub const AND: u16 = 0x50;
/// ALU: shift left.
pub const LSH: u16 = 0x60;
/// ALU: shift right.
pub const RSH: u16 = 0x70;
/// ALU: modulo.
pub const MOD: u16 = 0x90;
/// ALU: or.
pub const OR: u16 = 0x40;
/// ALU: exclusive or.
pub const XOR: u16 = 0xa0;
/// Jump: always.
pub const JA: u16 = 0x00;
/// Jump: if A equals the operand.
pub const JEQ: u16 = 0x10;
/// Jump: if A is greater than the operand.
pub const JGT: u16 = 0x20;
/// Jump: if A is greater than or equal to the operand.
pub const JGE: u16 = 0x30;
/// Operand: the constant k.
pub const K: u16 = 0x00;
/// Operand: register X.
pub const X: u16 = 0x08;
/// Return A.
pub const RET_A: u16 = 0x10;
/// Transfer A to X.
pub const TAX: u16 = 0x00;
/// Transfer X to A.
pub const TXA: u16 = 0x80;

/// Offset of the network header for `LD|ABS` loads (linux/filter.h `SKF_NET_OFF`): a reuseport
/// program's packet starts at the UDP payload, the IP header is reached through it.
pub const NET_OFF: u32 = (-0x10_0000i32) as u32;

/// One instruction of a program before its jumps are resolved ([`assemble`]).
pub enum Ins {
    /// An instruction: its code and constant.
    Op(u16, u32),
    /// A conditional jump: to `jt` if the test holds, else to `jf` (`None`: the next one).
    Jump(u16, u32, Option<&'static str>, Option<&'static str>),
    /// An unconditional jump.
    Goto(&'static str),
    /// The position a jump names.
    Label(&'static str),
}

pub use Ins::{Goto, Jump, Label, Op};

/// Resolve labels into relative forward jumps (every jump is forward; a jump too far for cBPF's
/// 8-bit offsets panics: the programs are fixed at compile time and tested).
pub fn assemble(ins: &[Ins]) -> Vec<libc::sock_filter> {
    let mut at = std::collections::HashMap::new();
    let mut pc = 0usize;
    for i in ins {
        match i {
            Label(l) => {
                at.insert(*l, pc);
            }
            _ => pc += 1,
        }
    }
    let mut out = Vec::with_capacity(pc);
    for i in ins {
        let here = out.len();
        // Offsets count from the instruction after this one; every jump is forward.
        let rel = |l: &Option<&'static str>| -> u32 { l.map_or(0, |l| (at[l] - here - 1) as u32) };
        match i {
            Label(_) => {}
            Op(code, k) => out.push(libc::sock_filter {
                code: *code,
                jt: 0,
                jf: 0,
                k: *k,
            }),
            Jump(code, k, jt, jf) => out.push(libc::sock_filter {
                code: *code,
                jt: u8::try_from(rel(jt)).expect("short jump"),
                jf: u8::try_from(rel(jf)).expect("short jump"),
                k: *k,
            }),
            Goto(l) => out.push(libc::sock_filter {
                code: JMP | JA,
                jt: 0,
                jf: 0,
                k: rel(&Some(l)),
            }),
        }
    }
    out
}

/// Attach `prog` to the `SO_REUSEPORT` group of the socket `fd`.
pub fn attach_reuseport(fd: RawFd, prog: &mut [libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "cBPF program too long"))?,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: setsockopt with a caller's fd and a sock_fprog pointing at `prog`, alive for the
    // call (the kernel copies the program).
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
