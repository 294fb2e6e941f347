// @partner-gateway/sdk: the partner API's client for Node 20+.
export {
  PartnerClient, USER_AGENT,
  type ApiResponse, type CallOptions, type ClientOptions, type CollectionMeta, type CreateGuestBody, type Event, type GetGuestQuery, type ListEventsQuery,
  type ListGuestsQuery, type ListPropertiesQuery, type ListRoomsQuery, type Meta, type Method, type Pagination, type Property,
  type QueryValue, type RequestOptions, type RetryInfo, type UpdateGuestBody,
  type CreateWebhookEndpointBody, type ListWebhookDeliveriesQuery, type ListWebhookEndpointsQuery, type UpdateWebhookEndpointBody, type WebhookAttempt, type WebhookEndpoint, type WebhookRecovery, type RecoverWebhookEndpointBody, type ListWebhookRecoveriesQuery,
} from './client.js'
export { ApiConnectionError, ApiError, ApiTimeoutError, TokenError, type ErrorCode, type FieldError, type ProblemDetails } from './errors.js'
export type { OAuthOptions } from './oauth.js'
export { verifyWebhook, WebhookVerificationError, type WebhookEvent, type WebhookHeaders } from './webhooks.js'
export type { components, operations, paths } from './openapi.js'
