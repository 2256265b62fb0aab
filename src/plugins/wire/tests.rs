use super::*;
use crate::domain::{MarkSet, Resources};

fn sent() -> SelectRequest {
    let Value::Object(m) = json!({
        "instance_uuids": ["a"], "num_instances": 1,
        "flavor": {"name": "small", "vcpus": 1},
        "image": null, "group": null,
        "required_traits": ["HW_CPU_X86_AVX2"], "forbidden_traits": [],
        "member_of": [], "ignore_hosts": [],
    }) else {
        unreachable!()
    };
    SelectRequest(m)
}

#[test]
fn select_answers_approve_deny_or_add_and_nothing_else_counts() {
    let req = sent();
    assert_eq!(
        read_select(&req, json!({"decision": "approve"})),
        Ok(Verdict::Approved)
    );
    assert_eq!(
        read_select(
            &req,
            json!({"decision": "deny", "reason": "tenant X is in maintenance"})
        ),
        Ok(Verdict::Denied("tenant X is in maintenance".into()))
    );
    assert_eq!(
        read_select(&req, json!({"decision": "deny"})),
        Ok(Verdict::Denied("no reason given".into()))
    );
    // Echoing the request unchanged is an approval.
    assert_eq!(
        read_select(
            &req,
            json!({"decision": "modify", "request": Value::Object(req.0.clone())})
        ),
        Ok(Verdict::Approved)
    );
    let Ok(Verdict::Modified(next)) = read_select(
        &req,
        json!({"decision": "modify", "request": {
            "forbidden_traits": ["CUSTOM_MAINTENANCE"],
            "member_of": [["6f1a2e4b-0000-4000-8000-000000000001"]],
            "ignore_hosts": ["compute3"],
        }}),
    ) else {
        panic!("an addition is a modification")
    };
    let added = additions(&req, &next);
    assert_eq!(added.forbidden_traits, ["CUSTOM_MAINTENANCE"]);
    assert_eq!(added.member_of, [["6f1a2e4b-0000-4000-8000-000000000001"]]);
    assert_eq!(added.ignore_hosts, ["compute3"]);
    assert!(added.required_traits.is_empty());
}

#[test]
fn select_answers_that_change_what_they_may_not_are_refused_naming_the_key() {
    let req = sent();
    let refused = |answer: Value, key: &str| match read_select(&req, answer.clone()) {
        Err(AnswerError::Refused(m)) => assert!(m.contains(key), "{m}"),
        other => panic!("{answer} → {other:?}"),
    };
    let modify = |request: Value| json!({"decision": "modify", "request": request});
    refused(
        modify(json!({"flavor": {"name": "large", "vcpus": 8}})),
        "flavor",
    );
    refused(modify(json!({"num_instances": 2})), "num_instances");
    refused(modify(json!({"instance_uuids": ["b"]})), "instance_uuids");
    refused(modify(json!({"image": {"id": "x"}})), "image");
    refused(modify(json!({"group": {"policy": "affinity"}})), "group");
    refused(modify(json!({"required_traits": []})), "required_traits");
    refused(modify(json!({"colour": "blue"})), "colour");
    let malformed = |answer: Value| {
        assert!(
            matches!(
                read_select(&req, answer.clone()),
                Err(AnswerError::Malformed(_))
            ),
            "{answer}"
        )
    };
    malformed(json!({"decision": "modify"}));
    malformed(json!({"decision": "maybe"}));
    malformed(json!({"decision": "approve", "extra": 1}));
    malformed(modify(json!({"forbidden_traits": ["lower_case"]})));
    malformed(modify(json!({"member_of": [["not-a-uuid"]]})));
    malformed(modify(json!({"member_of": [[]]})));
    malformed(modify(json!({"ignore_hosts": "compute1"})));
    malformed(json!([]));
}

fn three() -> Vec<HostState> {
    (1..=3)
        .map(|i| HostState::synthetic(i, Resources::new(8, 8192, 80), Resources::ZERO))
        .collect()
}

#[test]
fn filter_answers_remove_offered_hosts_and_naming_another_is_refused() {
    let hosts = three();
    let uuid = |i: usize| hosts[i].profile.uuid.to_string();
    assert_eq!(read_filter(&hosts, json!({})), Ok(Verdict::Approved));
    assert_eq!(
        read_filter(&hosts, json!({"remove": {}})),
        Ok(Verdict::Approved)
    );
    let Ok(Verdict::Modified(removed)) =
        read_filter(&hosts, json!({"remove": {uuid(0): "maintenance"}}))
    else {
        panic!("a removal is a modification")
    };
    assert_eq!(
        removed.get(&uuid(0)).map(String::as_str),
        Some("maintenance")
    );
    let all = json!({"remove": {uuid(0): "a", uuid(1): "b", uuid(2): "c"}});
    assert_eq!(
        read_filter(&hosts, all),
        Ok(Verdict::Denied("a; b; c".into()))
    );
    assert!(matches!(
        read_filter(&hosts, json!({"remove": {"elsewhere": "x"}})),
        Err(AnswerError::Refused(m)) if m.contains("elsewhere")
    ));
    assert!(matches!(
        read_filter(&hosts, json!({"keep": []})),
        Err(AnswerError::Malformed(_))
    ));
}

#[test]
fn weigh_answers_give_each_offered_host_a_weight_and_others_are_refused() {
    let hosts = three();
    let uuid = |i: usize| hosts[i].profile.uuid.to_string();
    assert_eq!(
        read_weigh(&hosts, json!({"weights": {}})),
        Ok(Verdict::Approved)
    );
    assert_eq!(
        read_weigh(&hosts, json!({"weights": {uuid(2): 5.0, uuid(0): -1}})),
        Ok(Verdict::Modified(vec![-1.0, 0.0, 5.0]))
    );
    assert!(matches!(
        read_weigh(&hosts, json!({"weights": {"elsewhere": 1.0}})),
        Err(AnswerError::Refused(_))
    ));
    assert!(matches!(
        read_weigh(&hosts, json!({"weights": {uuid(0): "high"}})),
        Err(AnswerError::Malformed(_))
    ));
}

#[test]
fn additions_reach_every_instance_once() {
    let mut reqs = vec![
        RequestContext::with_demand("a", "f", Resources::new(1, 512, 1)),
        RequestContext::with_demand("b", "f", Resources::new(1, 512, 1)),
    ];
    let added = Additions {
        required_traits: vec!["CUSTOM_GPU".into()],
        forbidden_traits: vec!["CUSTOM_MAINTENANCE".into()],
        member_of: vec![vec!["6f1a2e4b-0000-4000-8000-000000000001".into()]],
        ignore_hosts: vec!["compute3".into()],
    };
    added.apply(&mut reqs);
    added.apply(&mut reqs[..1]);
    for r in &reqs {
        let view = additive_view(r);
        assert_eq!(view["required_traits"], json!(["CUSTOM_GPU"]));
        assert_eq!(view["forbidden_traits"], json!(["CUSTOM_MAINTENANCE"]));
        assert_eq!(view["ignore_hosts"], json!(["compute3"]));
    }
    assert!(reqs.iter().all(|r| r.query.member_of.len() == 1));
}

#[test]
fn move_answers_approve_deny_or_name_another_host_of_the_plan() {
    let sent = json!({"instance_uuid": "i-1", "source": "a", "destination": "b"});
    let hosts = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    let read = |answer: Value| read_move(&sent, &hosts, answer);
    assert_eq!(read(json!({"decision": "approve"})), Ok(Verdict::Approved));
    assert_eq!(
        read(json!({"decision": "deny", "reason": "maintenance on b"})),
        Ok(Verdict::Denied("maintenance on b".into()))
    );
    assert_eq!(
        read(json!({"decision": "deny"})),
        Ok(Verdict::Denied("no reason given".into()))
    );
    assert_eq!(
        read(json!({"decision": "modify", "move": {"destination": "c"}})),
        Ok(Verdict::Modified("c".into()))
    );
    assert_eq!(
        read(json!({"decision": "modify", "move": {"destination": "b"}})),
        Ok(Verdict::Approved),
        "the same destination changes nothing"
    );
    let Err(AnswerError::Refused(why)) =
        read(json!({"decision": "modify", "move": {"destination": "z"}}))
    else {
        panic!("a host outside the plan is refused")
    };
    assert!(why.contains("\"z\""), "{why}");
    for malformed in [
        json!({"decision": "modify"}),
        json!({"decision": "modify", "move": {"destination": "c", "source": "c"}}),
        json!({"decision": "maybe"}),
        json!({"decision": "approve", "extra": 1}),
    ] {
        assert!(
            matches!(read(malformed.clone()), Err(AnswerError::Malformed(_))),
            "{malformed}"
        );
    }
}

/// The body written straight from the hosts holds each candidate with exactly the schema's
/// keys, read from the host here field by field, a class beyond the fixed four (named through
/// the class table) and marks included; [`candidate_view`] is the same; a
/// profile changed after it was first offered (a trait, its host name) is offered as it is
/// now, not as it was encoded. A class used up has no free key; one used without usable
/// capacity is free below zero.
#[test]
fn offer_bodies_hold_the_candidates_views_and_follow_a_changed_profile() {
    use crate::domain::{ClassId, TraitId};
    let custom = ClassId::intern("CUSTOM_OFFER_TEST").expect("a valid class");
    let mut usable = Resources::new(8, 8192, 80);
    usable.set(custom, 3);
    let mut hosts: Vec<HostState> = (1..=4)
        .map(|i| HostState::synthetic(i, usable, Resources::new(i, 512 * i, 0)))
        .collect();
    hosts[1].used.set(custom, 2);
    hosts[1].num_instances = 7;
    // All of one class used (no free key for it), and a class used without usable capacity
    // (free below zero: written the long way, from the host's amounts).
    hosts[2].used.set(ClassId::from_index(2), 80);
    let stray = ClassId::intern("CUSTOM_OFFER_STRAY").expect("a valid class");
    hosts[3].used.set(stray, 1);
    hosts[2].profile_mut().traits = MarkSet::new([TraitId::intern("CUSTOM_MAINTENANCE")]);
    // More used than usable of a class it has (free below zero, written from the encoding),
    // and the widest numbers.
    hosts[0].used.set(ClassId::VCPU, 10);
    hosts[0].num_instances = i64::MAX;
    let mut widest = usable;
    widest.set(ClassId::MEMORY_MB, i64::MAX);
    hosts.push(HostState::synthetic(5, widest, Resources::new(0, 1, 0)));
    hosts[4].used.set(ClassId::VCPU, i64::MIN);
    // A class whose key is too long to be encoded with the profile, and a profile with more
    // classes than are: both written the long way.
    let long = ClassId::intern("CUSTOM_A_CLASS_NAME_LONGER_THAN_A_RECORD").expect("a class");
    let mut long_usable = usable;
    long_usable.set(long, 4);
    hosts.push(HostState::synthetic(
        6,
        long_usable,
        Resources::new(1, 1, 1),
    ));
    hosts[5].used.set(long, 1);
    let mut many = usable;
    for i in 0..9 {
        many.set(
            ClassId::intern(&format!("CUSTOM_OFFER_MANY_{i}")).expect("a class"),
            i + 1,
        );
    }
    hosts.push(HostState::synthetic(7, many, Resources::new(2, 2, 2)));
    let instance = json!({"instance_uuid": "i-1", "resources": {"VCPU": 1}});
    let amounts = |r: &Resources| -> Value {
        r.nonzero()
            .map(|(class, v)| (class.name().to_string(), json!(v)))
            .collect::<Map<_, _>>()
            .into()
    };
    let view = |h: &HostState, rank: usize| {
        json!({
            "uuid": &*h.profile.uuid, "host": &**h.host(), "node": &**h.node(),
            "availability_zone": &**h.availability_zone(), "rank": rank,
            "usable": amounts(h.usable()), "used": amounts(&h.used), "free": amounts(&h.free()),
            "num_instances": h.num_instances,
            "traits": h.profile.traits.names(), "aggregates": h.profile.aggregates.names(),
        })
    };
    let expected = |hosts: &[HostState]| {
        json!({
            "api_version": API_VERSION, "event": "filter", "plugin": "p", "request": instance,
            "candidates": hosts.iter().enumerate().map(|(r, h)| view(h, r)).collect::<Vec<_>>(),
        })
    };
    let body = |hosts: &[HostState]| -> Value {
        serde_json::from_slice(&offer_body("filter", "p", &instance, hosts)).expect("JSON")
    };
    assert_eq!(body(&hosts), expected(&hosts));
    assert_eq!(
        body(&hosts[1..3]),
        expected(&hosts[1..3]),
        "ranks follow the list"
    );
    assert_eq!(body(&[]), expected(&[]));
    assert_eq!(candidate_view(&hosts[1], 4), view(&hosts[1], 4));

    // Changed in place after the first offer: through profile_mut, which forgets the encoding.
    hosts[0].profile_mut().traits = MarkSet::new([TraitId::intern("HW_CPU_X86_AVX2")]);
    hosts[0].profile_mut().host = "renamed".into();
    // A copy shares nothing encoded either: it is made to be changed.
    let mut copy = (*hosts[3].profile).clone();
    copy.availability_zone = "az2".into();
    hosts[3].profile = std::sync::Arc::new(copy);
    let again = body(&hosts);
    assert_eq!(again, expected(&hosts));
    assert_eq!(again["candidates"][0]["host"], "renamed");
    assert_eq!(again["candidates"][0]["traits"], json!(["HW_CPU_X86_AVX2"]));
    assert_eq!(again["candidates"][3]["availability_zone"], "az2");
    assert_eq!(again["candidates"][1]["used"]["CUSTOM_OFFER_TEST"], 2);
    assert_eq!(again["candidates"][2]["free"].get("DISK_GB"), None);
    assert_eq!(again["candidates"][3]["free"]["CUSTOM_OFFER_STRAY"], -1);
    assert_eq!(again["candidates"][0]["free"]["VCPU"], -2);
    assert_eq!(again["candidates"][0]["num_instances"], i64::MAX);
    assert_eq!(again["candidates"][4]["used"]["VCPU"], i64::MIN);
    assert_eq!(again["candidates"][4]["free"]["MEMORY_MB"], i64::MAX - 1);
    assert_eq!(
        again["candidates"][5]["free"]["CUSTOM_A_CLASS_NAME_LONGER_THAN_A_RECORD"],
        3
    );
    assert_eq!(again["candidates"][6]["usable"]["CUSTOM_OFFER_MANY_8"], 9);
    let encoded = |h: &HostState| h.profile.encoded.get_or_init(|| unreachable!()).mask;
    assert!(encoded(&hosts[4]).is_some(), "written from its records");
    assert_eq!(encoded(&hosts[5]), None, "a key too long for a record");
    assert_eq!(encoded(&hosts[6]), None, "more classes than records");
}

/// A candidate's numbers are written as Rust writes them, at each number of digits and
/// both ends of `i64`.
#[test]
fn numbers_are_written_in_decimal_at_every_width() {
    let mut values = vec![0, i64::MAX, i64::MIN, i64::MIN + 1];
    let mut power = 1i64;
    while let Some(next) = power.checked_mul(10) {
        values.extend([power - 1, power, power + 1, -power, -(power - 1), 7 * power]);
        power = next;
    }
    let mut tail = [0; super::TAIL];
    for v in values {
        let end = super::put_int(&mut tail, 3, v);
        assert_eq!(std::str::from_utf8(&tail[3..end]), Ok(&*v.to_string()));
    }
}
