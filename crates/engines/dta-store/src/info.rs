//! [`StoreInfo`]: what a writer (the translator, or the collector advertising its memory to a
//! remote translator) needs to know about one store: its header and, for Append stores, the
//! lists' current heads.

use crate::error::StoreError;
use crate::header::Header;
use crate::region::Region;
use crate::{AppendLayout, StoreKind};

/// One store's header (the single source of truth for its layout) and, for an Append store, the
/// lists' current head pointers (empty for every other kind).
#[derive(Debug, Clone, PartialEq)]
pub struct StoreInfo {
    pub header: Header,
    pub append_heads: Vec<u64>,
}

impl StoreInfo {
    /// Read a mapped region's header and, for an Append store, its head pointers.
    pub fn from_region(region: &Region) -> Result<StoreInfo, StoreError> {
        let header = region.header().clone();
        let mut append_heads = vec![];
        if header.kind == StoreKind::Append {
            let layout = AppendLayout::new(&header)?;
            for list in 0..layout.lists() {
                let head = region
                    .mem()
                    .load_u64(layout.head_offset(list))
                    .map_err(|e| StoreError::BadGeometry(format!("Append head {list}: {e}")))?;
                append_heads.push(head);
            }
        }
        Ok(StoreInfo {
            header,
            append_heads,
        })
    }
}
