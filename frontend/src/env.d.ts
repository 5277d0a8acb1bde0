// Vite bundles CSS imported from JS; the type checker only needs to know it is allowed.
declare module "*.css";
