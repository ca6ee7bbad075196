/** fast-gateway (restana + fast-proxy-lite, keep-alive agent to the upstream by default): every path to `argv[2]`. */
import gateway from 'fast-gateway';

const server = gateway({ routes: [{ prefix: '', target: process.argv[2] }], enableServicesEndpoint: false });
await server.start(0, '127.0.0.1');
console.log(`listening on http://127.0.0.1:${server.getServer().address().port}`);
