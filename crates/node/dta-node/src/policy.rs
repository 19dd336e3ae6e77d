//! The ingress policy: who may write which store, which rules run, how writes are metered,
//! where flagged reports are announced, how many NACKs are sent and whether what is sent to
//! reporters is authenticated — compiled once from the configuration against the
//! stores a node serves, and applied to every translator of every mode by [`IngressPolicy::apply`]
//! (the one function; docs/security.md, docs/modes.md).
//!
//! The XDP programs cannot call it: they get the same compiled policy as data instead
//! ([`IngressPolicy::source_prefixes`] fills their allow-list map, and stores with an allow-list
//! of their own stay with the userspace half, [`IngressPolicy::store_has_allow`]).

use std::sync::Arc;

use anyhow::Context;
use dta_store::notify::NotifyRing;
use dta_store::Header;
use dta_translator::control::{ControlAuth, NackBudget};
use dta_translator::rules::Rules;
use dta_translator::{Meter, Sinks, Translator};
use dta_wire::prefix::{AllowList, Prefix};

use dta_collector::StoreConfig;
use dta_translator::TranslatorConfig;

/// The compiled policy of one collector's translators (shared by its threads).
#[derive(Clone)]
pub struct IngressPolicy {
    /// `[translator] allow`: sources a datagram is taken from at all.
    allow: AllowList,
    /// `[[store]] allow`, by store name: sources a store's reports are taken from.
    store_allow: Vec<(String, AllowList)>,
    /// `[[translator.rules]]`, compiled against the served stores; replaced on reload.
    rules: Arc<Rules>,
    rule_state_entries: usize,
    /// The collector's write meter (`[translator.flow_control]`), one for its threads.
    meter: Arc<Meter>,
    /// Where flagged reports are announced when the sink writes shared memory.
    ring: Option<Arc<NotifyRing>>,
    /// `[translator] nack_budget`, one bucket for the collector's threads.
    nack_budget: Arc<NackBudget>,
    /// `[translator] control_key_file`: what is sent to reporters is authenticated.
    control: Option<Arc<ControlAuth>>,
}

impl IngressPolicy {
    /// Compile the policy of `t` (a collector's `[translator]`, or the INT sink's) and
    /// `stores` (their `[[store]]` tables) against `headers`, the stores as their region
    /// headers (or the collector's memory advertisement) describe them: the truth for a store's
    /// parameters. A per-store allow-list naming a store that is not served is an error (it
    /// would protect nothing). `ring`: the region directory's notification ring, for
    /// shared-memory sinks.
    pub fn compile(
        t: &TranslatorConfig,
        stores: &[StoreConfig],
        headers: &[Header],
        ring: Option<Arc<NotifyRing>>,
    ) -> anyhow::Result<IngressPolicy> {
        let mut per_store = vec![];
        let store_allow = stores
            .iter()
            .filter_map(|s| s.allow.as_ref().map(|a| (s.name.as_str(), a)));
        for (name, allow) in store_allow {
            if !headers.iter().any(|h| h.name == name) {
                anyhow::bail!(
                    "[[store]] {name:?} has an allow-list but is not among the served stores ({})",
                    headers
                        .iter()
                        .map(|h| h.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            per_store.push((name.to_string(), allow.clone()));
        }
        Ok(IngressPolicy {
            allow: t.allow.clone(),
            store_allow: per_store,
            rules: Rules::new(crate::config::compile_rules(t, headers, 0)?),
            rule_state_entries: t.rule_state_entries,
            meter: Arc::new(Meter::new(&t.flow_control)),
            ring,
            nack_budget: NackBudget::new(t.nack_budget),
            control: t
                .control_key_file
                .as_deref()
                .map(|p| crate::config::read_control_key(p).map(ControlAuth::new))
                .transpose()?,
        })
    }

    /// [`IngressPolicy::compile`] of a collector's configuration (its `[translator]` and its
    /// `[[store]]` tables).
    pub fn of_config(
        cfg: &crate::config::Config,
        headers: &[Header],
        ring: Option<Arc<NotifyRing>>,
    ) -> anyhow::Result<IngressPolicy> {
        IngressPolicy::compile(&cfg.translator, &cfg.store, headers, ring)
    }

    /// Apply the policy to one translator: the global and per-store allow-lists, the shared
    /// rules and meter, and the notification ring. Every mode's builder calls this for every
    /// translator it makes (threads, classifier, XDP's userspace half, RoCEv2, the C ABI, the
    /// INT sink's translators).
    pub fn apply<S: Sinks>(&self, t: Translator<S>) -> anyhow::Result<Translator<S>> {
        let mut t = t
            .with_meter(self.meter.clone())
            .with_nack_budget(self.nack_budget.clone())
            .with_rules(self.rules.clone(), self.rule_state_entries);
        t.set_allow(self.allow.clone());
        if let Some(a) = &self.control {
            t.set_control_auth(a.clone());
        }
        for (name, allow) in &self.store_allow {
            t.set_store_allow(name, allow.clone())
                .with_context(|| format!("[[store]] {name:?} allow"))?;
        }
        if let Some(ring) = &self.ring {
            t.sinks_mut().set_ring(ring.clone());
        }
        Ok(t)
    }

    /// The global allow-list's prefixes: what the XDP programs' source map holds.
    pub fn source_prefixes(&self) -> &[Prefix] {
        self.allow.prefixes()
    }

    /// The global allow-list.
    pub fn allow(&self) -> &AllowList {
        &self.allow
    }

    /// Whether store `name` has an allow-list of its own (its reports are then checked by the
    /// userspace translator, never applied in the driver).
    pub fn store_has_allow(&self, name: &str) -> bool {
        self.store_allow.iter().any(|(n, _)| n == name)
    }

    /// The rules shared by the translators (replaced on reload).
    pub fn rules(&self) -> &Arc<Rules> {
        &self.rules
    }

    pub fn meter(&self) -> &Arc<Meter> {
        &self.meter
    }
}
