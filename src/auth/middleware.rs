//! [`Auth`] as an actix-web middleware: `App::new().wrap(auth.clone())` runs [`Auth::check`]
//! before every route and answers a denial as `{"error": {"class", "message"}}`.

use super::{Auth, Denial};
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{forward_ready, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header;
use actix_web::HttpResponse;
use futures::future::{ready, LocalBoxFuture, Ready};
use std::rc::Rc;

impl<S, B> Transform<S, ServiceRequest> for Auth
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = actix_web::Error;
    type Transform = AuthMiddleware<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(AuthMiddleware {
            service: Rc::new(service),
            auth: self.clone(),
        }))
    }
}

/// One worker's instance of the middleware.
pub struct AuthMiddleware<S> {
    service: Rc<S>,
    auth: Auth,
}

impl<S, B> Service<ServiceRequest> for AuthMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let service = self.service.clone();
        let auth = self.auth.clone();
        Box::pin(async move {
            let token = req.headers().get("X-Auth-Token").map(|v| v.as_bytes());
            let outcome = auth.check(req.method(), req.path(), token).await;
            match outcome {
                Ok(()) => service.call(req).await.map(|r| r.map_into_left_body()),
                Err(denial) => {
                    let response = denial_response(&auth, &denial);
                    Ok(req.into_response(response).map_into_right_body())
                }
            }
        })
    }
}

fn denial_response(auth: &Auth, denial: &Denial) -> HttpResponse {
    let mut response = HttpResponse::build(denial.status);
    if denial.status == actix_web::http::StatusCode::UNAUTHORIZED {
        if let Some(challenge) = auth.challenge() {
            response.insert_header((header::WWW_AUTHENTICATE, challenge));
        }
    }
    response.json(crate::nova::http_error_body(
        denial.class,
        &denial.message,
        None,
    ))
}
