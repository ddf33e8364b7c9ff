# From KV Cache to KDA — every command a newcomer needs. Python 3.11, make and npm are assumed.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: book pdf lab check test test-site bench clean catalogs

# The English site: every notebook runs once, its figures drawn in both languages
BUILD_EN := ATTNLAB_WIDGETS=static ATTNLAB_LANGUAGES=en,zh_CN $(BIN)/jupyter-book build . -W -n --keep-going

## book: set up (once), then build the website into _build/html (cached, never stale), its
## Chinese edition into _build/html/zh (from the same executed notebooks and the catalogs under
## locale/) and the course PDF it links (make pdf: about a minute more, notebooks from the cache)
book: $(STAMP) _offline/.lock-hash chromium
	$(BIN)/python tools/cache_key.py
	$(BUILD_EN)
	$(BIN)/python tools/build_edition.py html
	$(MAKE) pdf
	@echo "Open file://$(CURDIR)/_build/html/index.html"

## pdf: the whole course as one PDF, _build/pdf/from-kv-cache-to-kda.pdf (the single-page HTML
## build printed by headless Chromium), also copied into _build/html for the site's download link;
## and in Chinese, from-kv-cache-to-kda.zh_CN.pdf, copied into _build/html/zh
pdf: $(STAMP) _offline/.lock-hash chromium
	ATTNLAB_WIDGETS=static ATTNLAB_LANGUAGES=en,zh_CN $(BIN)/jupyter-book build . --builder singlehtml --keep-going
	$(BIN)/python tools/make_pdf.py _build/singlehtml _build/pdf/from-kv-cache-to-kda.pdf
	$(BIN)/python tools/build_edition.py pdf

## lab: open the lessons in JupyterLab
lab: $(STAMP)
	$(BIN)/jupyter lab chapters/

## check: lint, the standalone cells, and the package and environment tests (about 3.5 minutes on
## 2 cores): what a contributor runs before committing. The website calculator's parity test
## runs _static/calculator.js in headless Chromium (no build needed), hence chromium.
check: $(STAMP) chromium
	$(BIN)/ruff check .
	$(BIN)/python tools/bootstrap_cell.py --check
	$(BIN)/python -m pytest -m "not site and not lab and not pdf and not standalone" -q

## test-site: the built website and PDF in headless Chromium (after make book)
test-site: $(STAMP) chromium
	$(BIN)/python -m pytest -m "site or pdf" -q

## test: set up, then every test (what CI runs): make check, a clean build that runs every
## notebook, the course PDF, the built site in headless Chromium, Lesson 1 in a live JupyterLab,
## and one lesson downloaded and run in a fresh environment outside the repository
test: check _offline/.lock-hash chromium
	rm -rf _build
	$(BIN)/python tools/cache_key.py
	$(BUILD_EN)
	$(BIN)/python tools/build_edition.py html
	$(MAKE) pdf
	$(MAKE) test-site
	$(BIN)/python -m pytest -m lab -q
	$(BIN)/python -m pytest -m standalone -q

## bench: time every notebook, slider and kernel on this machine; writes benchmarks/results/
bench: $(STAMP)
	cd benchmarks && ../$(BIN)/python run_all.py

## catalogs: after changing English prose, bring the Chinese catalogs (locale/zh_CN) up to date:
## a changed paragraph's translation turns fuzzy until a translator revises it
catalogs: $(STAMP)
	$(BIN)/python tools/build_edition.py extract

clean:
	rm -rf _build _offline node_modules

$(STAMP): requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt -c constraints.txt
	touch $(STAMP)

_offline/.lock-hash: package.json package-lock.json tools/vendor_js.sh
	./tools/vendor_js.sh

.PHONY: chromium
chromium:
	@command -v chromium >/dev/null || { command -v apt-get >/dev/null && \
	  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) ; } || \
	  { echo "Install Debian's chromium (apt-get install chromium) for the site tests"; exit 1; }
	@fc-list 2>/dev/null | grep -q "Noto Sans CJK" || { command -v apt-get >/dev/null && \
	  (apt-get update -qq && apt-get install -y -qq fonts-noto-cjk >/dev/null) ; } || \
	  { echo "Install a CJK font (apt-get install fonts-noto-cjk): screenshots show the glossary"; exit 1; }
	@fc-list 2>/dev/null | grep -q "Noto Color Emoji" || { command -v apt-get >/dev/null && \
	  (apt-get update -qq && apt-get install -y -qq fonts-noto-color-emoji >/dev/null) ; } || \
	  { echo "Install an emoji font (apt-get install fonts-noto-color-emoji): the benchmark's ✅/❌ print in the PDFs"; exit 1; }
