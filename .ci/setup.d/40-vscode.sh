#!/usr/bin/env bash
# VS Code extension and its end-to-end test: apt deps, headless Chromium, an offline
# code-server 4.100.3 (the last release on node 20), the extension's node packages,
# the .vsix, and the puppeteer-core driver. Idempotent: each step is skipped when done.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CS_VERSION=4.100.3
CS_HOME="${TABD_CODE_SERVER_HOME:-$ROOT/.cache/code-server}"
CS_DIR="$CS_HOME/node_modules/code-server"
export npm_config_yes=true npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

need_apt=()
command -v rg >/dev/null || need_apt+=(ripgrep)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need_apt+=(libkrb5-dev)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
command -v node >/dev/null || need_apt+=(nodejs npm)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "40-vscode: apt-get install ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# code-server: its own installer downloads from GitHub, which is unreachable; this
# installs the npm package without scripts and builds the native parts against /usr.
if [ ! -e "$CS_HOME/.installed-$CS_VERSION" ]; then
    echo "40-vscode: installing code-server $CS_VERSION into $CS_HOME (a few minutes)"
    rm -rf "$CS_HOME"
    mkdir -p "$CS_HOME"
    (
        cd "$CS_HOME"
        export npm_config_nodedir=/usr
        echo '{"name":"tabd-code-server","private":true}' > package.json
        npm install --no-save --ignore-scripts --loglevel=error "code-server@$CS_VERSION"
        (cd node_modules && npm rebuild argon2 --loglevel=error)
        cd node_modules/code-server/lib/vscode
        npm install --omit=dev --ignore-scripts --loglevel=error
        mkdir -p node_modules/@vscode/ripgrep/bin
        cp "$(command -v rg)" node_modules/@vscode/ripgrep/bin/
        npm rebuild --foreground-scripts --loglevel=error >/dev/null
        ln -sfn node_modules node_modules.asar
        (cd bin/remote-cli && ln -sfn code-linux.sh code-server)
        (cd bin/helpers && ln -sfn browser-linux.sh browser.sh)
        (cd extensions && npm install --omit=dev --loglevel=error)
    )
    XDG_CONFIG_HOME="$CS_HOME/config" node "$CS_DIR/out/node/entry.js" --version
    touch "$CS_HOME/.installed-$CS_VERSION"
fi

# The extension: npm ci only when the lockfile changed; the .vsix is rebuilt when a source is newer.
ext="$ROOT/editors/vscode"
stamp="$ext/node_modules/.tabd-lock"
if ! cmp -s "$ext/package-lock.json" "$stamp" 2>/dev/null; then
    (cd "$ext" && npm ci --loglevel=error && cp package-lock.json node_modules/.tabd-lock)
fi
if [ ! -e "$ext/tabd.vsix" ] || [ -n "$(find "$ext/src" "$ext/package.json" "$ext/package-lock.json" "$ext/tsconfig.json" "$ext/README.md" "$ext/.vscodeignore" -newer "$ext/tabd.vsix" 2>/dev/null | head -1)" ]; then
    (cd "$ext" && npm run --silent package)
fi

drv="$ROOT/tests/editors/e2e/vscode"
stamp="$drv/node_modules/.tabd-lock"
if ! cmp -s "$drv/package-lock.json" "$stamp" 2>/dev/null; then
    (cd "$drv" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --loglevel=error && cp package-lock.json node_modules/.tabd-lock)
fi
echo "40-vscode: ok"
