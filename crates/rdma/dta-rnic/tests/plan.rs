//! The registrations and advertisements of a real collector's regions, without a device.

use dta_collector::{Collector, StoreConfig};
use dta_rdma::adv::{parse_native, ProtoAdv};
use dta_rnic::plan::{adverts, MappedRegion};
use dta_rnic::RnicConfig;
use dta_store::header::HEADER_LEN;

fn stores() -> Vec<StoreConfig> {
    [
        "name = 'kw'\nkind = 'key-write'\nslots = 1024\nkey_len = 4\ndata_len = 4\n",
        "name = 'counters'\nkind = 'key-increment'\ncounters = 512\nkey_len = 4\n",
        "name = 'ev'\nkind = 'append'\nlists = 4\ncapacity = 64\nentry_len = 4\nbatch = 4\n",
    ]
    .iter()
    .map(|t| toml::from_str(t).unwrap())
    .collect()
}

#[test]
fn registrations_cover_each_whole_region_file() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    let maps = MappedRegion::from_collector(&c).unwrap();
    assert_eq!(maps.len(), 3);
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
    c.stores()[1].region.mem().store_u64(0, 42).unwrap();
    // SAFETY: offset 0 of the data area is inside the mapping.
    assert_eq!(
        unsafe { std::ptr::read_volatile(reg.data_addr as *const u64) },
        42
    );
}

#[test]
fn adverts_are_the_software_responders_format_and_decode_back() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    // An Append list that already advanced: the advertisement must carry its head.
    let ev = &c.stores()[2].region;
    let layout = dta_store::AppendLayout::new(ev.header()).unwrap();
    ev.mem().store_u64(layout.head_offset(2), 12).unwrap();

    let maps = MappedRegion::from_collector(&c).unwrap();
    let rkeys = [0x1111_2222, 0x3333_4444, 0x5555_6666];
    let stores: Vec<_> = maps
        .iter()
        .zip(rkeys)
        .map(|(m, k)| m.advertised(k).unwrap())
        .collect();
    let a = adverts(&stores, 1).unwrap();

    // Prototype: the data area of store 1, so a prototype translator's offsets land where ours do.
    let p = ProtoAdv::parse(&a.prototype).unwrap();
    let regs: Vec<_> = maps.iter().map(|m| m.registration()).collect();
    assert_eq!(p.addr, regs[1].data_addr);
    assert_eq!(p.length as u64, regs[1].data_len);
    assert_eq!(p.rkey, 0x3333_4444);

    let back = parse_native(&a.native).unwrap();
    assert_eq!(back.len(), 3);
    for (i, s) in back.iter().enumerate() {
        assert_eq!(
            &s.header,
            c.stores()[i].region.header(),
            "layout header survives"
        );
        assert_eq!(s.rkey, rkeys[i]);
        assert_eq!(s.region_va, regs[i].addr);
        assert_eq!(s.region_len, regs[i].length);
        assert_eq!(s.data_va(), regs[i].data_addr);
    }
    assert!(back[0].append_heads.is_empty());
    assert_eq!(back[2].append_heads, vec![0, 0, 12, 0]);

    // Both messages by default, prototype first; each can be turned off.
    let mut cfg = RnicConfig::default();
    assert_eq!(a.messages(&cfg), vec![&a.prototype[..], &a.native[..]]);
    cfg.advertise_prototype = false;
    assert_eq!(a.messages(&cfg), vec![&a.native[..]]);
}

#[test]
fn adverts_refuse_inconsistent_input() {
    let dir = tempfile::tempdir().unwrap();
    let c = Collector::create(dir.path(), &stores(), false).unwrap();
    let maps = MappedRegion::from_collector(&c).unwrap();
    let stores: Vec<_> = maps.iter().map(|m| m.advertised(1).unwrap()).collect();
    let e = adverts(&stores, 3).unwrap_err();
    assert!(e.to_string().contains("prototype store"), "{e}");
    assert!(adverts(&[], 0).is_err(), "nothing to advertise");
    // A data area beyond 4 GiB is capped in the prototype message, as the responder does.
    let mut big = stores.clone();
    big[0].header.data_len = 1 << 33;
    big[0].region_len = (1 << 33) + 4096;
    let a = adverts(&big, 0).unwrap();
    assert_eq!(ProtoAdv::parse(&a.prototype).unwrap().length, u32::MAX);
}

#[test]
fn read_only_or_changed_regions_are_refused_with_their_path() {
    let dir = tempfile::tempdir().unwrap();
    drop(Collector::create(dir.path(), &stores(), false).unwrap());
    let ro = Collector::open_dir(dir.path(), false).unwrap();
    let e = MappedRegion::from_collector(&ro).unwrap_err();
    assert!(e.to_string().contains("read-only"), "{e}");

    let c = Collector::open_dir(dir.path(), true).unwrap();
    let path = c.stores()[0].region.path().to_owned();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[60] ^= 0xff; // inside the name: the header CRC no longer matches
    std::fs::write(&path, &bytes).unwrap();
    let e = MappedRegion::from_collector(&c).unwrap_err();
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}
