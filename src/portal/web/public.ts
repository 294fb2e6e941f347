import type { components } from '../../../sdk/src/openapi'

// The partner API's objects as its OpenAPI document declares them, through the partner client's
// generated types (npm run sdk): the page reads the same routes as a partner's code, so it takes
// their shapes from the same source rather than a copy that could drift from it.

type Schemas = components['schemas']

export type Credential = Schemas['Credential']
export type PublicEvent = Schemas['Event']
export type Endpoint = Schemas['WebhookEndpoint']
export type Delivery = Schemas['WebhookAttempt']
export type Recovery = Schemas['WebhookRecovery']
export type RequestLogEntry = Schemas['RequestLogEntry']
