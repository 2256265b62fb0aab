//! What each decoded message asks of the ledger: checked here, without the ledger, so that a
//! bad message never opens a savepoint, and handed over as a typed [`Effect`].

use crate::ledger::{
    Applied, ApplyError, Effect, HostRegistration, Ledger, LedgerError, Message, Outcome, Placed,
};
use crate::nova::{HostEvent, HostStatePayload, Notification};

/// A host-state event's registration, validated.
pub(super) fn registration(p: &HostStatePayload) -> Result<HostRegistration, String> {
    let reg = HostRegistration {
        host: p.host.clone(),
        node: p.node.clone(),
        uuid: p.compute_node_uuid.clone(),
        availability_zone: p.availability_zone.clone().unwrap_or_else(|| "nova".into()),
        up: p.up,
        disabled: p.disabled,
        inventories: p.inventory.iter().map(|(c, i)| (c.clone(), *i)).collect(),
        traits: p.traits.clone(),
        aggregates: p.aggregates.clone(),
    };
    reg.validate().map_err(|e| e.to_string())?;
    Ok(reg)
}

/// What an instance's placement notification says of its move (`ledger::moves`).
fn placed(event_type: &str) -> Placed {
    match event_type {
        "instance.create.end" => Placed::Built,
        "instance.resize_finish.end" => Placed::ResizeFinished,
        "instance.resize_revert.end" => Placed::ResizeReverted,
        // A confirmation or a live migration's end on its destination ends the move; an
        // evacuation's rebuild too, its source still held by Placement.
        "instance.resize_confirm.end" | "instance.live_migration_post_dest.end" => {
            Placed::MoveEnded
        }
        "instance.rebuild.end" => Placed::Evacuated,
        _ => Placed::Other,
    }
}

/// The effect `n` asks for; [`Effect::Invalid`] with the reason when it can never be applied.
fn effect_of(n: &Notification) -> Effect {
    match &n.event {
        HostEvent::HostState(p) => match registration(p) {
            Ok(registration) => Effect::HostState {
                registration,
                sent_ms: n.sent_ms(),
            },
            Err(reason) => Effect::Invalid(reason),
        },
        HostEvent::Upsert { demand, .. } if !demand.is_non_negative() => {
            Effect::Invalid(format!("negative flavor sizes {demand:?}"))
        }
        HostEvent::Upsert {
            instance_uuid,
            host,
            node,
            demand,
            ..
        } => Effect::Place {
            instance: instance_uuid.clone(),
            host: host.clone(),
            node: node.clone(),
            demand: *demand,
            step: placed(&n.event_type),
        },
        HostEvent::Move {
            instance_uuid,
            step,
        } => Effect::Move {
            instance: instance_uuid.clone(),
            step: *step,
        },
        HostEvent::Release {
            instance_uuid,
            host,
        } => Effect::Release {
            instance: instance_uuid.clone(),
            host: host.clone(),
            deleted: n.event_type == "instance.delete.end",
        },
        HostEvent::ServiceCreate { host } => Effect::ServiceCreated { host: host.clone() },
        HostEvent::ServiceDelete { host } => Effect::ServiceDeleted { host: host.clone() },
        HostEvent::ServiceUpdate {
            host,
            disabled,
            forced_down,
        } => Effect::ServiceUpdated {
            host: host.clone(),
            disabled: *disabled,
            forced_down: *forced_down,
        },
        HostEvent::DeleteInstanceInfo {
            host,
            instance_uuid,
        } => Effect::LeftHost {
            host: host.clone(),
            instance: instance_uuid.clone(),
        },
        HostEvent::UpdateInstanceInfo {
            host,
            instance_uuids,
        }
        | HostEvent::SyncInstanceInfo {
            host,
            instance_uuids,
        } => Effect::RunOn {
            host: host.clone(),
            instances: instance_uuids.clone(),
        },
        // Aggregates and measured usage are no ledger state either: `Ingest` hands them
        // to the cloud view and to the table's usage.
        // A failure changes the ledger once Placement was asked (`placement::check_failed`).
        HostEvent::Unknown { .. }
        | HostEvent::Aggregates(_)
        | HostEvent::Metrics(_)
        | HostEvent::Failed { .. } => Effect::RecordOnly,
    }
}

/// `n` as the ledger applies it: its key, its kind and its effect.
pub fn message_of(n: &Notification) -> Message {
    Message {
        sent_at: n.sent_at().to_string(),
        id: n.message_id.clone(),
        kind: n.event_type.clone(),
        effect: effect_of(n),
    }
}

/// Applies a batch in one transaction (see [`Ledger::apply_messages`]): in order, each
/// message exactly once; a rejected message changes nothing and does not affect the others;
/// `Err` means the ledger failed and nothing of the batch was committed.
pub async fn apply_batch(
    ledger: &Ledger,
    batch: &[&Notification],
    now_ms: i64,
) -> Result<Vec<Outcome>, LedgerError> {
    let messages = batch.iter().map(|n| message_of(n)).collect();
    ledger.apply_messages(messages, now_ms).await
}

/// Applies `n` to the ledger exactly once.
pub async fn apply(ledger: &Ledger, n: &Notification, now_ms: i64) -> Result<Applied, ApplyError> {
    let mut outcomes = apply_batch(ledger, &[n], now_ms).await?;
    match outcomes.pop() {
        Some(Ok(applied)) => Ok(applied),
        Some(Err(reason)) => Err(ApplyError::Rejected(reason)),
        None => Err(ApplyError::Rejected("empty batch".into())),
    }
}
