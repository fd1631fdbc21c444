//! The Access call of the Operations service: what the caller may do with a namespace.

use tonic::{Request, Response, Status};
use wal_namespaces::Action;
use wal_proto::v1::{AccessRequest, AccessResponse};
use wal_runtime::tls::Peer;

use super::OperationsService;

impl OperationsService {
    pub(super) async fn access_call(
        &self,
        request: Request<AccessRequest>,
    ) -> Result<Response<AccessResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let namespace = self.namespace(&request.into_inner().namespace).await?;
        let allows = |action| self.authorizer.allows(peer.as_ref(), &namespace, action);
        Ok(Response::new(AccessResponse {
            principal: peer
                .as_ref()
                .and_then(|p| p.principal.as_deref())
                .unwrap_or_default()
                .to_owned(),
            authorization: self.authorizer.is_on(),
            admin: allows(Action::Admin),
            write: allows(Action::Write),
        }))
    }
}
