//! The registrations and advertisements of a real collector's regions, without a device.

use dta_collector::{Collector, StoreConfig};
use dta_rnic::advert::{native, prototype};
use dta_rnic::plan::{adverts, decode_native, MappedRegion};
use dta_store::header::HEADER_LEN;

fn stores() -> Vec<StoreConfig> {
    let kw: StoreConfig = toml::from_str(
        "name = 'kw'\nkind = 'key-write'\nslots = 1024\nkey_len = 4\ndata_len = 4\n",
    )
    .unwrap();
    let ki: StoreConfig =
        toml::from_str("name = 'counters'\nkind = 'key-increment'\ncounters = 512\nkey_len = 4\n")
            .unwrap();
    vec![kw, ki]
}

#[test]
fn registrations_cover_each_whole_region_file() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    let maps = MappedRegion::from_collector(&c).unwrap();
    assert_eq!(maps.len(), 2);
    for (m, s) in maps.iter().zip(c.stores()) {
        let file_len = std::fs::metadata(s.region.path()).unwrap().len();
        let r = m.registration();
        assert_eq!(r.name, s.name);
        assert_eq!(r.addr, m.as_mut_ptr() as u64);
        assert_eq!(r.length, file_len, "the whole file is registered");
        assert_eq!(r.data_addr - r.addr, HEADER_LEN as u64);
        assert_eq!(r.data_len, s.region.header().data_len);
        assert!(r.data_addr + r.data_len <= r.addr + r.length);
        assert_eq!(r.access, 0xf);
        assert_eq!(r.addr % 4096, 0, "mappings are page aligned");
    }
}

#[test]
fn the_registered_mapping_is_the_collectors_memory() {
    // What the NIC writes through the registration is what the collector's regions (and so the
    // queries) read: both are MAP_SHARED mappings of the same file.
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    let maps = MappedRegion::from_collector(&c).unwrap();
    let reg = maps[1].registration();
    let at = 8 * 17;
    // SAFETY: data_addr + at + 8 lies inside the mapping (data_len is 512 counters of 8 bytes).
    unsafe {
        std::ptr::write_volatile(
            (reg.data_addr + at) as *mut u64,
            u64::from_le_bytes(*b"ABCDEFGH"),
        )
    };
    let v = c.stores()[1].region.mem().load_u64(at).unwrap();
    assert_eq!(v.to_le_bytes(), *b"ABCDEFGH");
    // And the other way round.
    c.stores()[1].region.mem().store_u64(0, 42).unwrap();
    // SAFETY: offset 0 of the data area is inside the mapping.
    assert_eq!(
        unsafe { std::ptr::read_volatile(reg.data_addr as *const u64) },
        42
    );
}

#[test]
fn adverts_describe_every_store_and_decode_back() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    let maps = MappedRegion::from_collector(&c).unwrap();
    let regs: Vec<_> = maps.iter().map(|m| m.registration()).collect();
    let rkeys = [0x1111_2222, 0x3333_4444];
    let a = adverts(&regs, &rkeys, 1).unwrap();

    // Prototype: the data area of store 1, so a prototype translator's offsets land where ours do.
    let p =
        prototype::Repr::parse(&prototype::Packet::new_checked(&a.prototype[..]).unwrap()).unwrap();
    assert_eq!(p.addr, regs[1].data_addr);
    assert_eq!(p.length as u64, regs[1].data_len);
    assert_eq!(p.rkey, 0x3333_4444);

    assert_eq!(a.native.len(), 2);
    for (i, msg) in a.native.iter().enumerate() {
        let (header, repr) = decode_native(msg).unwrap();
        assert_eq!(
            &header,
            c.stores()[i].region.header(),
            "layout header survives"
        );
        assert_eq!(repr.index as usize, i);
        assert_eq!(repr.count, 2);
        assert_eq!(repr.rkey, rkeys[i]);
        assert_eq!(repr.addr, regs[i].addr);
        assert_eq!(repr.length, regs[i].length);
        assert_eq!(repr.data_addr, regs[i].data_addr);
        assert_eq!(repr.data_len, regs[i].data_len);
        assert_eq!(msg.len(), native::LEN);
    }
}

#[test]
fn adverts_refuse_inconsistent_input() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    let maps = MappedRegion::from_collector(&c).unwrap();
    let regs: Vec<_> = maps.iter().map(|m| m.registration()).collect();
    assert!(adverts(&regs, &[1], 0).is_err(), "one rkey for two regions");
    assert!(adverts(&regs, &[1, 2], 2).is_err(), "no store 2");
    assert!(adverts(&[], &[], 0).is_err(), "nothing to advertise");
    let mut big = regs.clone();
    big[0].data_len = 1 << 33;
    big[0].length = 1 << 34;
    let e = adverts(&big, &[1, 2], 0).unwrap_err();
    assert!(e.to_string().contains("32-bit"), "{e}");
}

#[test]
fn a_corrupt_region_file_is_refused_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    let path = c.stores()[0].region.path().to_owned();
    drop(c);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[60] ^= 0xff; // inside the name: the header CRC no longer matches
    std::fs::write(&path, &bytes).unwrap();
    let e = MappedRegion::open(&path).unwrap_err();
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    let short = dir.path().join("short.region");
    std::fs::write(&short, [0u8; 100]).unwrap();
    let e = MappedRegion::open(&short).unwrap_err();
    assert!(
        e.to_string().contains("shorter than the header page"),
        "{e}"
    );
}
