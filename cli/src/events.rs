//! `docpipe events tail`: docpipe's events, live, as a consumer sees them. It subscribes the way
//! any consumer would (an EventBridge rule on the bus matching `source: docpipe`, targeting an
//! SQS queue of its own), prints each event as it arrives, and removes the rule and the queue
//! when it stops.

use std::time::Duration;

/// A rule and the queue it delivers docpipe's events to.
pub struct Subscription {
    pub bus: String,
    pub rule: String,
    pub queue_url: String,
}

/// Subscribes a new queue `name` to every docpipe event on `bus`.
pub async fn subscribe(
    events: &aws_sdk_eventbridge::Client,
    sqs: &aws_sdk_sqs::Client,
    bus: &str,
    name: &str,
) -> anyhow::Result<Subscription> {
    let queue_url = sqs
        .create_queue()
        .queue_name(name)
        .send()
        .await?
        .queue_url
        .ok_or_else(|| anyhow::anyhow!("SQS created {name} without a URL"))?;
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await?
        .attributes
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .cloned()
        })
        .ok_or_else(|| anyhow::anyhow!("SQS gave {name} no ARN"))?;
    let rule_arn = events
        .put_rule()
        .name(name)
        .event_bus_name(bus)
        .event_pattern(serde_json::json!({ "source": [docpipe_db::outbox::SOURCE] }).to_string())
        .send()
        .await?
        .rule_arn
        .unwrap_or_default();
    // In AWS the queue must let EventBridge send to it, and only for this rule.
    let policy = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": { "Service": "events.amazonaws.com" },
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": { "ArnEquals": { "aws:SourceArn": rule_arn } }
        }]
    });
    sqs.set_queue_attributes()
        .queue_url(&queue_url)
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::Policy,
            policy.to_string(),
        )
        .send()
        .await?;
    events
        .put_targets()
        .rule(name)
        .event_bus_name(bus)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("tail")
                .arn(queue_arn)
                .build()?,
        )
        .send()
        .await?;
    Ok(Subscription {
        bus: bus.to_string(),
        rule: name.to_string(),
        queue_url,
    })
}

impl Subscription {
    /// The events that arrived within `wait`, as EventBridge delivered them (`id`, `source`,
    /// `detail-type`, `time`, `detail`), each taken off the queue.
    pub async fn receive(
        &self,
        sqs: &aws_sdk_sqs::Client,
        wait: Duration,
    ) -> anyhow::Result<Vec<serde_json::Value>> {
        let out = sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(wait.as_secs().min(20) as i32)
            .send()
            .await?;
        let mut events = Vec::new();
        for m in out.messages.unwrap_or_default() {
            let body = m.body.unwrap_or_default();
            match serde_json::from_str(&body) {
                Ok(v) => events.push(v),
                Err(e) => tracing::warn!(error = %e, "a message on the events queue is no event"),
            }
            if let Some(handle) = m.receipt_handle {
                sqs.delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await?;
            }
        }
        Ok(events)
    }

    /// Removes the rule (its target first) and the queue.
    pub async fn remove(
        &self,
        events: &aws_sdk_eventbridge::Client,
        sqs: &aws_sdk_sqs::Client,
    ) -> anyhow::Result<()> {
        events
            .remove_targets()
            .rule(&self.rule)
            .event_bus_name(&self.bus)
            .ids("tail")
            .send()
            .await?;
        events
            .delete_rule()
            .name(&self.rule)
            .event_bus_name(&self.bus)
            .send()
            .await?;
        sqs.delete_queue().queue_url(&self.queue_url).send().await?;
        Ok(())
    }
}

/// One line for a person: time, type, and what it is about.
pub fn line(event: &serde_json::Value) -> String {
    let detail = &event["detail"];
    let about = [
        "doc_id",
        "work_id",
        "version_id",
        "label",
        "from_version_id",
        "to_version_id",
        "stage",
        "reason",
    ]
    .iter()
    .filter_map(|k| {
        let v = &detail[*k];
        (!v.is_null()).then(|| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
    })
    .collect::<Vec<_>>()
    .join(" ");
    let counts = &detail["counts"];
    let changed = if counts.is_object() {
        format!(
            " modified={} added={} removed={} renumbered={}",
            counts["modified"], counts["added"], counts["removed"], counts["renumbered"]
        )
    } else {
        String::new()
    };
    format!(
        "{}  {:<18} {}{}",
        detail["occurred_at"].as_str().unwrap_or_default(),
        event["detail-type"].as_str().unwrap_or_default(),
        about,
        changed
    )
}

#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// The bus (default: DOCPIPE_EVENT_BUS).
    #[arg(long, env = "DOCPIPE_EVENT_BUS")]
    pub bus: String,
    /// Only these types (repeatable), e.g. --type ArticlesChanged.
    #[arg(long = "type")]
    pub types: Vec<String>,
    /// Print each event whole, one JSON object a line.
    #[arg(long)]
    pub json: bool,
    /// Stop after this many seconds (default: until interrupted).
    #[arg(long)]
    pub for_secs: Option<u64>,
}

/// Prints docpipe's events live until interrupted (or `--for-secs`), then unsubscribes.
pub async fn tail(args: TailArgs) -> anyhow::Result<()> {
    let mut env = docpipe_core::env::EnvReader::from_process();
    let aws = docpipe_core::config::AwsConfig::read(&mut env);
    env.finish()?;
    let sdk = docpipe_pipeline::adapters::aws::sdk_config(&aws).await;
    let events = aws_sdk_eventbridge::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let name = format!("docpipe-tail-{}-{nanos:08x}", std::process::id());
    let sub = subscribe(&events, &sqs, &args.bus, &name).await?;
    eprintln!(
        "tailing docpipe events on bus {} (rule {}); Ctrl-C stops",
        args.bus, sub.rule
    );
    let until = args
        .for_secs
        .map(|s| std::time::Instant::now() + Duration::from_secs(s));
    let result = async {
        loop {
            if until.is_some_and(|u| std::time::Instant::now() >= u) {
                return Ok(());
            }
            let batch = tokio::select! {
                r = sub.receive(&sqs, Duration::from_secs(2)) => r?,
                _ = tokio::signal::ctrl_c() => return Ok(()),
            };
            for event in batch {
                let kind = event["detail-type"].as_str().unwrap_or_default();
                if !args.types.is_empty() && !args.types.iter().any(|t| t == kind) {
                    continue;
                }
                if args.json {
                    println!("{event}");
                } else {
                    println!("{}", line(&event));
                }
            }
        }
    }
    .await;
    if let Err(e) = sub.remove(&events, &sqs).await {
        eprintln!(
            "could not remove the tail's rule and queue {}: {e}",
            sub.rule
        );
    }
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_says_the_type_and_what_the_event_is_about() {
        let event = serde_json::json!({
            "detail-type": "ArticlesChanged",
            "detail": {
                "occurred_at": "2026-12-07T05:00:00.000Z",
                "work_id": 3, "from_version_id": 4, "to_version_id": 9,
                "counts": { "modified": 2, "added": 1, "removed": 0, "renumbered": 5 }
            }
        });
        assert_eq!(
            super::line(&event),
            "2026-12-07T05:00:00.000Z  ArticlesChanged    work_id=3 from_version_id=4 to_version_id=9 modified=2 added=1 removed=0 renumbered=5"
        );
    }
}
