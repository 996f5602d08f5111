//! `template.yaml`, read the way CloudFormation would read the parts the dev runner and the tests
//! play locally: the parameters' defaults, the functions' environment (where the pipeline's clock
//! comes from), and each queue's event source (batch size, batching window, maximum concurrency).
//! Only `!Ref` to a parameter is resolved; anything else (`!Sub`, `!GetAtt`) is AWS's business.

use anyhow::{anyhow, bail, Context};
use serde_yaml::Value;
use std::path::{Path, PathBuf};

pub struct Template {
    root: Value,
}

/// How Lambda's poller feeds a function from one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSource {
    /// The function's logical id in the template.
    pub function: String,
    pub batch_size: i32,
    pub batching_window_secs: u64,
    /// `ScalingConfig.MaximumConcurrency`, or the function's reserved concurrency, whichever is
    /// lower; `None` when neither is set.
    pub max_concurrency: Option<usize>,
}

impl Template {
    pub fn load(path: &Path) -> anyhow::Result<Template> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the SAM template {}", path.display()))?;
        Template::parse(&text).with_context(|| format!("{} is not valid YAML", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Template> {
        Ok(Template {
            root: serde_yaml::from_str(text)?,
        })
    }

    /// `DOCPIPE_TEMPLATE`, else the `template.yaml` of the working directory or the repository.
    pub fn locate() -> PathBuf {
        if let Some(path) = std::env::var_os("DOCPIPE_TEMPLATE") {
            return PathBuf::from(path);
        }
        let here = PathBuf::from("template.yaml");
        if here.exists() {
            return here;
        }
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("template.yaml")
    }

    pub fn parameter_default(&self, name: &str) -> Option<String> {
        scalar(self.root.get("Parameters")?.get(name)?.get("Default")?)
    }

    /// A literal, or a `!Ref` to a parameter with a default.
    pub fn resolve(&self, value: &Value) -> Option<String> {
        match value {
            Value::Tagged(tagged) if tagged.tag == "!Ref" => {
                let name = tagged.value.as_str()?;
                self.parameter_default(name)
            }
            other => scalar(other),
        }
    }

    fn resource(&self, logical_id: &str) -> anyhow::Result<&Value> {
        self.root
            .get("Resources")
            .and_then(|r| r.get(logical_id))
            .ok_or_else(|| anyhow!("the template has no resource {logical_id}"))
    }

    /// Every variable the Globals give the functions that the pipeline's clock reads, resolved.
    pub fn clock_env(&self) -> anyhow::Result<Vec<(String, String)>> {
        let vars = self
            .root
            .get("Globals")
            .and_then(|g| g.get("Function"))
            .and_then(|f| f.get("Environment"))
            .and_then(|e| e.get("Variables"))
            .ok_or_else(|| anyhow!("the template's Globals set no function environment"))?;
        docpipe_core::clock::VARIABLES
            .iter()
            .map(|name| {
                let value = vars
                    .get(*name)
                    .ok_or_else(|| anyhow!("the template's Globals do not set {name}"))?;
                let resolved = self
                    .resolve(value)
                    .ok_or_else(|| anyhow!("{name} in the template has no value to resolve"))?;
                Ok((name.to_string(), resolved))
            })
            .collect()
    }

    /// The function a queue feeds, and how: an `AWS::Lambda::EventSourceMapping` or a function's
    /// `Events` entry of type SQS whose queue is `!GetAtt {queue}.Arn`.
    pub fn event_source(&self, queue: &str) -> anyhow::Result<EventSource> {
        let resources = self
            .root
            .get("Resources")
            .and_then(Value::as_mapping)
            .ok_or_else(|| anyhow!("the template has no Resources"))?;
        for (id, resource) in resources {
            let id = id.as_str().unwrap_or_default();
            let kind = resource.get("Type").and_then(Value::as_str);
            let props = resource.get("Properties");
            match kind {
                Some("AWS::Lambda::EventSourceMapping") => {
                    let Some(props) = props else { continue };
                    if get_att_arn(props.get("EventSourceArn")) == Some(queue) {
                        let function = props
                            .get("FunctionName")
                            .and_then(ref_name)
                            .ok_or_else(|| anyhow!("{id} names no function by !Ref"))?;
                        return self.source(function, props);
                    }
                }
                Some("AWS::Serverless::Function") => {
                    let events = props
                        .and_then(|p| p.get("Events"))
                        .and_then(Value::as_mapping);
                    for event in events.into_iter().flat_map(|m| m.values()) {
                        let is_sqs = event.get("Type").and_then(Value::as_str) == Some("SQS");
                        let Some(props) = event.get("Properties").filter(|_| is_sqs) else {
                            continue;
                        };
                        if get_att_arn(props.get("Queue")) == Some(queue) {
                            return self.source(id, props);
                        }
                    }
                }
                _ => {}
            }
        }
        bail!("no function in the template consumes the queue {queue}")
    }

    fn source(&self, function: &str, props: &Value) -> anyhow::Result<EventSource> {
        let number = |value: Option<&Value>| -> anyhow::Result<Option<u64>> {
            match value {
                None => Ok(None),
                Some(v) => {
                    let text = self
                        .resolve(v)
                        .ok_or_else(|| anyhow!("{function}: a value that does not resolve"))?;
                    Ok(Some(text.parse().with_context(|| {
                        format!("{function}: {text:?} is not a number")
                    })?))
                }
            }
        };
        // Lambda's default batch size for SQS is 10.
        let batch_size = number(props.get("BatchSize"))?.unwrap_or(10) as i32;
        let window = number(props.get("MaximumBatchingWindowInSeconds"))?.unwrap_or(0);
        let scaling = number(
            props
                .get("ScalingConfig")
                .and_then(|s| s.get("MaximumConcurrency")),
        )?;
        let reserved = number(
            self.resource(function)?
                .get("Properties")
                .and_then(|p| p.get("ReservedConcurrentExecutions")),
        )?;
        let max_concurrency = match (scaling, reserved) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .map(|n| n as usize);
        Ok(EventSource {
            function: function.to_string(),
            batch_size,
            batching_window_secs: window,
            max_concurrency,
        })
    }

    /// A queue's property, resolved (`VisibilityTimeout`, `MessageRetentionPeriod`, …).
    pub fn queue_property(&self, queue: &str, name: &str) -> anyhow::Result<Option<String>> {
        Ok(self
            .resource(queue)?
            .get("Properties")
            .and_then(|p| p.get(name))
            .and_then(|v| self.resolve(v)))
    }

    /// A queue's redrive policy's `maxReceiveCount`, resolved.
    pub fn max_receive_count(&self, queue: &str) -> anyhow::Result<Option<String>> {
        Ok(self
            .resource(queue)?
            .get("Properties")
            .and_then(|p| p.get("RedrivePolicy"))
            .and_then(|r| r.get("maxReceiveCount"))
            .and_then(|v| self.resolve(v)))
    }

    /// A function's `Timeout`, resolved, falling back on the Globals'.
    pub fn function_timeout(&self, function: &str) -> anyhow::Result<Option<String>> {
        self.function_property(function, "Timeout")
    }

    /// A function's `MemorySize` in MB, resolved, falling back on the Globals'; Lambda's default
    /// (128 MB) when neither sets it.
    pub fn function_memory_mb(&self, function: &str) -> anyhow::Result<u64> {
        match self.function_property(function, "MemorySize")? {
            Some(text) => text
                .parse()
                .with_context(|| format!("{function}: MemorySize {text:?} is not a number")),
            None => Ok(128),
        }
    }

    fn function_property(&self, function: &str, name: &str) -> anyhow::Result<Option<String>> {
        let own = self
            .resource(function)?
            .get("Properties")
            .and_then(|p| p.get(name))
            .and_then(|v| self.resolve(v));
        Ok(own.or_else(|| {
            self.root
                .get("Globals")
                .and_then(|g| g.get("Function"))
                .and_then(|f| f.get(name))
                .and_then(|v| self.resolve(v))
        }))
    }
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn ref_name(value: &Value) -> Option<&str> {
    match value {
        Value::Tagged(t) if t.tag == "!Ref" => t.value.as_str(),
        _ => None,
    }
}

/// `!GetAtt Queue.Arn` → `Queue`.
fn get_att_arn(value: Option<&Value>) -> Option<&str> {
    match value? {
        Value::Tagged(t) if t.tag == "!GetAtt" => t.value.as_str()?.strip_suffix(".Arn"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The template promises that a job outlives a dependency down for twice the index queue's
    /// visibility. Exactly twice is not enough: an outage is not clean (the dependency takes its
    /// time to stop and to start again) and a failed delivery waits out its backoff, up to the
    /// cap, before it tries again; 8 deliveries left 3 minutes of 2 hours.
    #[test]
    fn the_templates_deliveries_outlast_twice_the_index_visibility_with_a_backoff_cap_to_spare() {
        let template = Template::load(&Template::locate()).unwrap();
        let vars: std::collections::HashMap<String, String> =
            template.clock_env().unwrap().into_iter().collect();
        let mut env = docpipe_core::env::EnvReader::with_lookup(move |k| vars.get(k).cloned());
        let clock = docpipe_core::clock::Clock::read(&mut env);
        env.finish().unwrap();
        let outlasted = clock.outage_outlasted();
        let promised = clock.index.visibility * 2 + clock.backoff_max;
        assert!(
            outlasted >= promised,
            "{} deliveries outlast {outlasted:?}, under {promised:?}",
            clock.max_receive_count
        );
        // A document waiting out its backoffs must not raise the stalled-queue alarm.
        let alarm: u64 = template
            .parameter_default("OldestMessageAgeThreshold")
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            std::time::Duration::from_secs(alarm) > outlasted,
            "the oldest-message alarm ({alarm} s) fires while a job still backs off ({outlasted:?})"
        );
    }

    #[test]
    fn refs_resolve_to_parameter_defaults_and_event_sources_are_found() {
        let t = Template::parse(
            r#"
Parameters:
  Batch: { Type: Number, Default: 3 }
  Vis: { Type: Number, Default: 90 }
Globals:
  Function:
    Timeout: 60
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: !Ref Vis
  F:
    Type: AWS::Serverless::Function
    Properties:
      ReservedConcurrentExecutions: 4
      Events:
        Jobs:
          Type: SQS
          Properties:
            Queue: !GetAtt Q.Arn
            BatchSize: !Ref Batch
            ScalingConfig: { MaximumConcurrency: 6 }
"#,
        )
        .unwrap();
        assert_eq!(
            t.queue_property("Q", "VisibilityTimeout")
                .unwrap()
                .as_deref(),
            Some("90")
        );
        let source = t.event_source("Q").unwrap();
        assert_eq!(source.function, "F");
        assert_eq!(source.batch_size, 3);
        assert_eq!(source.max_concurrency, Some(4));
        assert_eq!(t.function_timeout("F").unwrap().as_deref(), Some("60"));
        assert!(t.event_source("Nope").is_err());
    }
}
