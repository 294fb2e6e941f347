import { describe, expect, it } from 'vitest'
import { Metrics } from '../../src/admin/metrics.js'

// The per-request series, counted through records found by route, method, status and code:
// what /metrics shows of them.

/** The lines of the two per-request series (counts only), as /metrics writes them. */
async function requestLines(metrics: Metrics): Promise<string[]> {
  const text = await metrics.registry.metrics()
  return text.split('\n').filter((line) => /^gateway_http_request(s_total|_duration_seconds_(count|sum|bucket\{.*le="0\.005"))/.test(line)).sort()
}

describe('the per-request series', () => {
  it('counts each route, method, status and code apart, and times them by route, method and status', async () => {
    const metrics = new Metrics()
    metrics.request('/v1/properties/{propertyId}', 'GET', 200, '', 0.001)
    metrics.request('/v1/properties/{propertyId}', 'GET', 200, '', 0.002)
    metrics.request('/v1/properties/{propertyId}', 'GET', 404, 'PROPERTY_NOT_FOUND', 0.5)
    metrics.request('/v1/properties/{propertyId}', 'HEAD', 404, 'PROPERTY_NOT_FOUND', 0.25)
    // Another code with the same status: its own count, the same time series.
    metrics.request('/v1/properties/{propertyId}', 'GET', 404, 'ROUTE_NOT_FOUND', 0.25)
    metrics.request('unmatched', 'GET', 404, 'ROUTE_NOT_FOUND', 0.001)
    expect(await requestLines(metrics)).toEqual([
      'gateway_http_request_duration_seconds_bucket{route="/v1/properties/{propertyId}",method="GET",status="200",le="0.005"} 2',
      'gateway_http_request_duration_seconds_bucket{route="/v1/properties/{propertyId}",method="GET",status="404",le="0.005"} 0',
      'gateway_http_request_duration_seconds_bucket{route="/v1/properties/{propertyId}",method="HEAD",status="404",le="0.005"} 0',
      'gateway_http_request_duration_seconds_bucket{route="unmatched",method="GET",status="404",le="0.005"} 1',
      'gateway_http_request_duration_seconds_count{route="/v1/properties/{propertyId}",method="GET",status="200"} 2',
      'gateway_http_request_duration_seconds_count{route="/v1/properties/{propertyId}",method="GET",status="404"} 2',
      'gateway_http_request_duration_seconds_count{route="/v1/properties/{propertyId}",method="HEAD",status="404"} 1',
      'gateway_http_request_duration_seconds_count{route="unmatched",method="GET",status="404"} 1',
      'gateway_http_request_duration_seconds_sum{route="/v1/properties/{propertyId}",method="GET",status="200"} 0.003',
      'gateway_http_request_duration_seconds_sum{route="/v1/properties/{propertyId}",method="GET",status="404"} 0.75',
      'gateway_http_request_duration_seconds_sum{route="/v1/properties/{propertyId}",method="HEAD",status="404"} 0.25',
      'gateway_http_request_duration_seconds_sum{route="unmatched",method="GET",status="404"} 0.001',
      'gateway_http_requests_total{route="/v1/properties/{propertyId}",method="GET",status="200",code=""} 2',
      'gateway_http_requests_total{route="/v1/properties/{propertyId}",method="GET",status="404",code="PROPERTY_NOT_FOUND"} 1',
      'gateway_http_requests_total{route="/v1/properties/{propertyId}",method="GET",status="404",code="ROUTE_NOT_FOUND"} 1',
      'gateway_http_requests_total{route="/v1/properties/{propertyId}",method="HEAD",status="404",code="PROPERTY_NOT_FOUND"} 1',
      'gateway_http_requests_total{route="unmatched",method="GET",status="404",code="ROUTE_NOT_FOUND"} 1',
    ])
  })
})
