//! The CNI environment variables of one invocation.

use cni::spec::{CniError, ErrorCode};

/// What the runtime passed in the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CniEnv {
    pub command: Option<String>,
    pub container_id: Option<String>,
    pub netns: Option<String>,
    pub ifname: Option<String>,
    /// `CNI_ARGS` as written (`K=V;K=V`).
    pub args: Option<String>,
}

impl CniEnv {
    /// Read the variables through `get` (the process environment in `main`).
    pub fn read(get: impl Fn(&str) -> Option<String>) -> CniEnv {
        let non_empty = |k: &str| get(k).filter(|v| !v.is_empty());
        CniEnv {
            command: non_empty("CNI_COMMAND"),
            container_id: non_empty("CNI_CONTAINERID"),
            netns: non_empty("CNI_NETNS"),
            ifname: non_empty("CNI_IFNAME"),
            args: non_empty("CNI_ARGS"),
        }
    }

    /// A variable the command cannot do without (code 4 naming it when absent).
    pub fn require<'a>(
        value: &'a Option<String>,
        name: &str,
        command: &str,
    ) -> Result<&'a str, CniError> {
        value.as_deref().ok_or_else(|| {
            CniError::new(
                ErrorCode::InvalidEnvironment,
                format!("{name} is not set; the runtime must set it for {command}"),
            )
        })
    }

    /// `CNI_ARGS` split into pairs; a segment without `=` is an error (code 4).
    pub fn arg_pairs(&self) -> Result<Vec<(String, String)>, CniError> {
        let Some(args) = &self.args else {
            return Ok(Vec::new());
        };
        args.split(';')
            .filter(|s| !s.is_empty())
            .map(|segment| {
                segment
                    .split_once('=')
                    .filter(|(k, _)| !k.is_empty())
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .ok_or_else(|| {
                        CniError::new(
                            ErrorCode::InvalidEnvironment,
                            format!("CNI_ARGS segment {segment:?} is not KEY=VALUE"),
                        )
                    })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cni_args_split_into_pairs() {
        let env = CniEnv {
            args: Some("IgnoreUnknown=1;K8S_POD_NAME=web-1;io.contiv.network=blue;".into()),
            ..CniEnv::default()
        };
        let pairs = env.arg_pairs().unwrap();
        assert_eq!(pairs.len(), 3);
        assert_eq!(pairs[2], ("io.contiv.network".into(), "blue".into()));
        let bad = CniEnv {
            args: Some("a=1;oops".into()),
            ..CniEnv::default()
        };
        assert_eq!(
            bad.arg_pairs().unwrap_err().code,
            ErrorCode::InvalidEnvironment
        );
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let env = CniEnv::read(|k| (k == "CNI_NETNS").then(String::new));
        assert_eq!(env.netns, None);
        let err = CniEnv::require(&env.netns, "CNI_NETNS", "ADD").unwrap_err();
        assert_eq!(err.code.code(), 4);
        assert!(err.msg.contains("CNI_NETNS"));
    }
}
