/**
 * The example Lambda function of docs/serverless.md: it takes API Gateway's proxy event and answers with
 * a proxy response. `GET /hello/{name}` greets.
 */
interface ProxyEvent {
  httpMethod: string;
  path: string;
  pathParameters: Record<string, string>;
}

export async function handler(event: ProxyEvent): Promise<unknown> {
  return {
    statusCode: 200,
    headers: { 'content-type': 'application/json', 'x-greeted-by': 'lambda' },
    body: JSON.stringify({ message: `hello ${event.pathParameters?.name ?? 'world'}`, method: event.httpMethod, path: event.path }),
  };
}
