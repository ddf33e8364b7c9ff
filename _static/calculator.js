// From KV Cache to KDA: the website's config.json calculator (calculator.md), computed in the
// browser. A port of the package's reader and byte counts, kept equal to them by
// tests/test_calculator_parity.py (every config of tests/data/hf_configs.json, every published
// preset and every mutation of their fields, in headless Chromium):
//   attnlab.configs.architecture_from_config   -> readConfig
//   attnlab.kinds.KINDS (numbers per layer)    -> KINDS
//   attnlab.serving.sequence_bytes             -> sequenceBytes
//   attnlab.memory.context_limit               -> contextLimit
//   attnlab.serving.largest_context (batch 1,
//     the memory left after the weights)       -> largestContext
// Integers are BigInt (exact, like Python's); a JSON number written with "." or an exponent is
// a float, as Python's json module reads it, and is refused where an integer belongs.
// tools/book_extras.py loads this file on the calculator page only.
(function (root) {
  "use strict";

  // ------------------------------------------------------------------ errors and Python reprs
  function refusal(type, message) {
    var error = new Error(message);
    error.pyType = type; // "TypeError" or "ValueError", as the package raises
    return error;
  }
  function valueError(message) { return refusal("ValueError", message); }
  function typeError(message) { return refusal("TypeError", message); }

  function isDict(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function isInt(v) { return typeof v === "bigint"; }

  function pyType(v) {
    if (v === null) return "NoneType";
    if (typeof v === "bigint") return "int";
    if (typeof v === "number") return "float";
    if (typeof v === "string") return "str";
    if (typeof v === "boolean") return "bool";
    return Array.isArray(v) ? "list" : "dict";
  }
  function floatRepr(x) {
    if (Number.isNaN(x)) return "nan";
    if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
    if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
    var a = Math.abs(x);
    if (a >= 1e16 || a < 1e-4) { // Python's repr switches to an exponent here
      var parts = x.toExponential().split("e");
      var exp = Number(parts[1]);
      var digits = String(Math.abs(exp)).padStart(2, "0");
      return parts[0] + "e" + (exp < 0 ? "-" : "+") + digits;
    }
    var s = String(x);
    return /[.e]/.test(s) ? s : s + ".0";
  }
  function strRepr(s) {
    var quote = s.indexOf("'") >= 0 && s.indexOf('"') < 0 ? '"' : "'";
    var out = "";
    for (var ch of s) {
      var c = ch.codePointAt(0);
      if (ch === "\\") out += "\\\\";
      else if (ch === quote) out += "\\" + ch;
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "\t") out += "\\t";
      else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
      else out += ch;
    }
    return quote + out + quote;
  }
  function repr(v) {
    if (v === null || v === undefined) return "None";
    if (typeof v === "boolean") return v ? "True" : "False";
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "number") return floatRepr(v);
    if (typeof v === "string") return strRepr(v);
    if (Array.isArray(v)) return "[" + v.map(repr).join(", ") + "]";
    return "{" + Object.keys(v).map(function (k) {
      return strRepr(k) + ": " + repr(v[k]);
    }).join(", ") + "}";
  }

  // ------------------------------------------------------------------ JSON, as Python reads it
  // Integers stay exact (BigInt) and apart from floats; NaN, Infinity and -Infinity are floats
  // (Python's json module accepts them); a repeated key keeps its last value.
  function parseJSON(text) {
    var i = 0;
    function fail(what) {
      throw valueError("config.json: not valid JSON (" + what + " at character " + i + ")");
    }
    function space() { while (i < text.length && " \t\n\r".indexOf(text[i]) >= 0) i++; }
    function literal(word, value) {
      if (text.slice(i, i + word.length) !== word) fail("unexpected text");
      i += word.length;
      return value;
    }
    function string() {
      var out = "";
      i++; // the opening quote
      for (;;) {
        if (i >= text.length) fail("unterminated string");
        var ch = text[i++];
        if (ch === '"') return out;
        if (ch === "\\") {
          var e = text[i++];
          var simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r",
            t: "\t" };
          if (e in simple) out += simple[e];
          else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i, i + 4))) {
            out += String.fromCharCode(parseInt(text.slice(i, i + 4), 16));
            i += 4;
          } else fail("bad escape");
        } else if (ch < " ") fail("control character in a string");
        else out += ch;
      }
    }
    function number() {
      var m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i));
      if (!m) fail("bad number");
      i += m[0].length;
      return m[2] || m[3] ? Number(m[0]) : BigInt(m[0]);
    }
    function value() {
      space();
      var ch = text[i];
      if (ch === "{") {
        var obj = {};
        i++; space();
        if (text[i] === "}") { i++; return obj; }
        for (;;) {
          space();
          if (text[i] !== '"') fail("expected a key");
          var key = string();
          space();
          if (text[i++] !== ":") fail("expected ':'");
          Object.defineProperty(obj, key, { value: value(), enumerable: true, writable: true,
            configurable: true });
          space();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "}") { i++; return obj; }
          fail("expected ',' or '}'");
        }
      }
      if (ch === "[") {
        var arr = [];
        i++; space();
        if (text[i] === "]") { i++; return arr; }
        for (;;) {
          arr.push(value());
          space();
          if (text[i] === ",") { i++; continue; }
          if (text[i] === "]") { i++; return arr; }
          fail("expected ',' or ']'");
        }
      }
      if (ch === '"') return string();
      if (ch === "t") return literal("true", true);
      if (ch === "f") return literal("false", false);
      if (ch === "n") return literal("null", null);
      if (ch === "N") return literal("NaN", NaN);
      if (ch === "I") return literal("Infinity", Infinity);
      if (ch === "-" && text[i + 1] === "I") return literal("-Infinity", -Infinity);
      return number();
    }
    var result = value();
    space();
    if (i < text.length) fail("extra text");
    return result;
  }

  // ------------------------------------------------------------------ the reader's rules
  var ATTENTION_TYPES = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3",
    "qwen3_moe", "gemma", "gemma2", "gemma3_text", "llama4_text"];
  var QWEN_TYPES = ["qwen2", "qwen2_moe", "qwen3", "qwen3_moe"];
  var MODEL_TYPES = ATTENTION_TYPES.concat(["gemma3", "llama4", "deepseek_v2", "deepseek_v3",
    "kimi_linear", "qwen3_next", "minimax", "minimax_text_01", "minimax_m1", "jamba",
    "nemotron_h", "mamba2"]);
  var DEFAULTS = { // transformers' class defaults (attnlab.configs._DEFAULTS)
    gemma: { tie_word_embeddings: true },
    gemma2: { tie_word_embeddings: true },
    gemma3_text: { tie_word_embeddings: true, vocab_size: 262208n, sliding_window_pattern: 6n },
    llama4_text: { no_rope_layer_interval: 4n },
  };
  var NESTED = { gemma3: "gemma3_text", llama4: "llama4_text" };
  var LAYER_WORDS = { full_attention: "attn", sliding_attention: "swa",
    chunked_attention: "chunked" };
  var NEMOTRON_CHARS = { M: "mamba2", "*": "attn", "-": "mlp", E: "mlp" };
  var MAX_LAYERS = 100000n; // the browser's own limit (not the package's): a typo's 10^12 layers
  var REQUIRED = {};

  function has(obj, key) { return Object.prototype.hasOwnProperty.call(obj, key); }
  function integer(name, value, low) {
    if (!isInt(value)) {
      throw typeError(name + ": expected an integer >= " + low + ", got " + repr(value) + " (" +
        pyType(value) + ")");
    }
    if (value < low) throw valueError(name + ": expected an integer >= " + low + ", got " + value);
    return value;
  }

  function Fields(config, where, modelType) {
    if (!isDict(config)) {
      throw typeError(where + ": expected a dict of config.json fields, got " + pyType(config));
    }
    this.config = config;
    this.where = where;
    this.modelType = modelType === undefined ? null : modelType;
    this.defaults = (modelType !== null && has(DEFAULTS, modelType)) ? DEFAULTS[modelType] : {};
  }
  Fields.prototype.name = function (key) { return this.where + "[" + strRepr(key) + "]"; };
  Fields.prototype.given = function (key) {
    return has(this.config, key) && this.config[key] !== null;
  };
  Fields.prototype.value = function (key, dflt) {
    if (dflt === undefined) dflt = REQUIRED;
    if (this.given(key)) return this.config[key];
    if (has(this.defaults, key)) return this.defaults[key];
    if (dflt === REQUIRED) {
      throw valueError(this.where + ": expected a field " + strRepr(key) + " (model_type " +
        repr(this.modelType) + "), found none");
    }
    return dflt;
  };
  Fields.prototype.integer = function (key, low, dflt) {
    if (low === undefined) low = 1n;
    var value = this.value(key, dflt);
    if (value === null || (!this.given(key) && value === dflt)) return value;
    return integer(this.name(key), value, low);
  };
  Fields.prototype.integerOf = function (keys, low) {
    var self = this, found = [];
    keys.forEach(function (k) {
      if (self.given(k)) found.push([k, self.integer(k, low)]);
    });
    if (!found.length) {
      throw valueError(this.where + ": expected a field " + keys.map(strRepr).join(" or ") +
        " (model_type " + repr(this.modelType) + "), found none");
    }
    var values = found.map(function (f) { return f[1]; });
    if (values.some(function (v) { return v !== values[0]; })) {
      throw valueError(found.map(function (f) { return self.name(f[0]); }).join(", ") +
        ": expected one value, got " + values.join(", "));
    }
    return values[0];
  };
  Fields.prototype.flag = function (key, dflt) {
    var value = this.value(key, dflt);
    if (typeof value !== "boolean") {
      throw typeError(this.name(key) + ": expected true or false, got " + repr(value));
    }
    return value;
  };
  Fields.prototype.items = function (key) {
    var value = this.value(key);
    if (!Array.isArray(value)) throw typeError(this.name(key) + ": expected a list, got " + repr(value));
    return value.slice();
  };
  Fields.prototype.string = function (key) {
    var value = this.value(key);
    if (typeof value !== "string") {
      throw typeError(this.name(key) + ": expected a string, got " + repr(value));
    }
    return value;
  };
  Fields.prototype.sub = function (key) {
    return new Fields(this.value(key), this.name(key), this.modelType);
  };

  function range(n) { var out = []; for (var i = 0; i < n; i++) out.push(i); return out; }
  function repeat(kind, n) { return range(n).map(function () { return kind; }); }
  function sortedInts(xs) { return xs.slice().sort(function (a, b) { return a < b ? -1 : a > b ? 1 : 0; }); }

  function layerIndices(f, key, n, first) {
    var items = f.items(key), last = BigInt(n - 1) + first;
    items.forEach(function (item, i) {
      integer(f.name(key) + "[" + i + "]", item, first);
      if (item > last) {
        throw valueError(f.name(key) + "[" + i + "]: expected a layer number in [" + first +
          ", " + last + "] (num_hidden_layers=" + n + "), got " + item);
      }
    });
    if (new Set(items).size !== items.length) {
      throw valueError(f.name(key) + ": expected distinct layer numbers, got " + repr(items));
    }
    return items;
  }

  function words(f, key, n, kinds) {
    var list = f.items(key);
    if (list.length !== n) {
      throw valueError(f.name(key) + ": expected num_hidden_layers=" + n + " entries, got " +
        list.length);
    }
    list.forEach(function (word, i) {
      if (typeof word !== "string" || !has(kinds, word)) {
        throw valueError(f.name(key) + "[" + i + "]: expected one of " +
          repr(Object.keys(kinds)) + ", got " + repr(word));
      }
    });
    return list.map(function (word) { return kinds[word]; });
  }

  function headDim(f, heads, keys) {
    var all = keys.concat(["head_dim"]);
    for (var j = 0; j < all.length; j++) if (f.given(all[j])) return f.integer(all[j]);
    var hidden = f.integer("hidden_size");
    if (hidden % heads) {
      throw valueError(f.name("hidden_size") + ": without a head_dim field, expected a " +
        "multiple of num_attention_heads=" + heads + ", got " + hidden);
    }
    return hidden / heads;
  }

  function attention(f, keys) {
    var heads = f.integer("num_attention_heads");
    var kv = f.integer("num_key_value_heads", 1n, heads);
    if (heads % kv) {
      throw valueError(f.name("num_key_value_heads") + ": expected a divisor of " +
        "num_attention_heads=" + heads + ", got " + kv);
    }
    return { n_heads: heads, head_dim: headDim(f, heads, keys || []), n_kv_heads: kv };
  }

  function localGlobal(f, n, kind) {
    var window = f.integer("sliding_window", 1n, null), firstSliding, pattern;
    var qwen = QWEN_TYPES.indexOf(kind) >= 0;
    if (qwen) {
      if (!f.flag("use_sliding_window", false)) window = null;
      firstSliding = window === null ? BigInt(n) : f.integer("max_window_layers", 0n);
    }
    if (f.given("layer_types")) pattern = words(f, "layer_types", n, LAYER_WORDS);
    else if (kind === "mistral" || kind === "mixtral") {
      pattern = repeat(window === null ? "attn" : "swa", n);
    } else if (qwen) {
      pattern = range(n).map(function (i) {
        return window !== null && BigInt(i) >= firstSliding ? "swa" : "attn";
      });
    } else if (kind === "gemma2") {
      pattern = range(n).map(function (i) { return (i + 1) % 2 ? "swa" : "attn"; });
    } else if (kind === "gemma3_text") {
      var every = f.integer("sliding_window_pattern");
      pattern = range(n).map(function (i) { return BigInt(i + 1) % every ? "swa" : "attn"; });
    } else if (kind === "llama4_text") pattern = llama4Layers(f, n);
    else if (kind === null && window !== null) {
      throw valueError(f.name("sliding_window") + ": a config without a model_type is read " +
        "as Llama's, which has no sliding window, got " + window + "; give its model_type " +
        "(or layer_types)");
    } else pattern = repeat("attn", n);
    var found = { layer_pattern: pattern };
    if (pattern.indexOf("chunked") >= 0) {
      found.attention_chunk_size = f.integer("attention_chunk_size");
    }
    if (pattern.indexOf("swa") < 0) return found;
    if (window === null) {
      throw valueError(f.name("sliding_window") + ": the config has sliding-window layers, " +
        "so expected a window (an integer >= 1), found none" +
        (qwen ? " (use_sliding_window is false)" : ""));
    }
    found.sliding_window = window;
    return found;
  }

  function llama4Layers(f, n) {
    var flags = f.given("no_rope_layers") ? f.items("no_rope_layers") : [];
    if (!flags.length) {
      var every = f.integer("no_rope_layer_interval");
      flags = range(n).map(function (i) { return BigInt(i + 1) % every !== 0n ? 1n : 0n; });
    }
    if (flags.length !== n) {
      throw valueError(f.name("no_rope_layers") + ": expected num_hidden_layers=" + n +
        " entries, got " + flags.length);
    }
    flags.forEach(function (flag, i) {
      if (flag !== 0n && flag !== 1n) {
        throw valueError(f.name("no_rope_layers") + "[" + i + "]: expected 0 (NoPE, global) " +
          "or 1 (RoPE, chunked), got " + repr(flag));
      }
    });
    return flags.map(function (flag) { return flag ? "chunked" : "attn"; });
  }

  function mla(f) {
    var m = {
      n_heads: f.integer("num_attention_heads"),
      qk_nope_head_dim: f.integer("qk_nope_head_dim"),
      qk_rope_head_dim: f.integer("qk_rope_head_dim"),
      v_head_dim: f.integer("v_head_dim"),
      kv_lora_rank: f.integer("kv_lora_rank"),
      q_lora_rank: f.integer("q_lora_rank", 1n, null),
    };
    m.rope = !f.flag("mla_use_nope", false);
    return m;
  }

  function kimi(f, n) {
    var linear = f.sub("linear_attn_config");
    var full = layerIndices(linear, "full_attn_layers", n, 1n);
    if (linear.given("kda_layers")) {
      var kda = layerIndices(linear, "kda_layers", n, 1n);
      var both = sortedInts(full.concat(kda));
      var every = both.length === n && both.every(function (x, i) { return x === BigInt(i + 1); });
      if (!every) {
        throw valueError(linear.name("kda_layers") + ", " + linear.name("full_attn_layers") +
          ": expected each of the layers 1.." + n + " (num_hidden_layers=" + n + ") in " +
          "exactly one list, got " + repr(sortedInts(kda)) + " and " + repr(sortedInts(full)));
      }
    }
    var fullSet = new Set(full.map(String));
    return {
      layer_pattern: range(n).map(function (i) { return fullSet.has(String(i + 1)) ? "mla" : "kda"; }),
      n_heads: linear.integer("num_heads"),
      head_dim: linear.integer("head_dim"),
      conv_size: linear.integer("short_conv_kernel_size"),
      mla: mla(f),
    };
  }

  function qwen3Next(f, n) {
    var pattern;
    if (f.given("layer_types")) {
      pattern = words(f, "layer_types", n, { full_attention: "attn", linear_attention: "gdn" });
    } else {
      var every = f.integer("full_attention_interval");
      pattern = range(n).map(function (i) { return BigInt(i + 1) % every === 0n ? "attn" : "gdn"; });
    }
    var out = Object.assign({ layer_pattern: pattern }, attention(f));
    out.conv_size = f.integer("linear_conv_kernel_dim");
    out.recurrent = {
      n_key_heads: f.integer("linear_num_key_heads"),
      key_dim: f.integer("linear_key_head_dim"),
      n_value_heads: f.integer("linear_num_value_heads"),
      value_dim: f.integer("linear_value_head_dim"),
    };
    return out;
  }

  function minimax(f, n) {
    var types = f.items("attn_type_list");
    if (types.length !== n) {
      throw valueError(f.name("attn_type_list") + ": expected num_hidden_layers=" + n +
        " entries, got " + types.length);
    }
    types.forEach(function (t, i) {
      if (t !== 0n && t !== 1n) {
        throw valueError(f.name("attn_type_list") + "[" + i + "]: expected 0 (lightning) or " +
          "1 (softmax), got " + repr(t));
      }
    });
    return Object.assign({
      layer_pattern: types.map(function (t) { return t ? "attn" : "lightning"; }),
    }, attention(f));
  }

  function jamba(f, n) {
    var period = f.integer("attn_layer_period");
    var offset = f.integer("attn_layer_offset", 0n);
    if (offset >= period) {
      throw valueError(f.name("attn_layer_offset") + ": expected less than " +
        "attn_layer_period=" + period + ", got " + offset);
    }
    var out = Object.assign({
      layer_pattern: range(n).map(function (i) {
        return BigInt(i) % period === offset ? "attn" : "mamba";
      }),
    }, attention(f));
    out.conv_size = f.integer("mamba_d_conv");
    out.ssm = { d_inner: f.integer("mamba_expand") * f.integer("hidden_size"),
      d_state: f.integer("mamba_d_state"), n_groups: 1n };
    return out;
  }

  function mamba2Heads(f, heads, headDimKey, groups) {
    var nHeads = f.integer(heads), nGroups = f.integerOf(groups);
    if (nHeads % nGroups) {
      throw valueError(groups.map(function (g) { return f.name(g); }).join(" or ") +
        ": expected a divisor of " + heads + "=" + nHeads + ", got " + nGroups);
    }
    return [nHeads * f.integer(headDimKey), nGroups];
  }

  function nemotronH(f) {
    var chars = Array.from(f.string("hybrid_override_pattern"));
    chars.forEach(function (c, i) {
      if (!has(NEMOTRON_CHARS, c)) {
        throw valueError(f.name("hybrid_override_pattern") + "[" + i + "]: expected one of " +
          repr(Object.keys(NEMOTRON_CHARS)) + ", got " + repr(c));
      }
    });
    var dims = mamba2Heads(f, "mamba_num_heads", "mamba_head_dim", ["n_groups", "mamba_n_groups"]);
    var out = Object.assign({
      layer_pattern: chars.map(function (c) { return NEMOTRON_CHARS[c]; }),
    }, attention(f, ["attention_head_dim"]));
    out.conv_size = f.integerOf(["conv_kernel", "mamba_d_conv"]);
    out.ssm = { d_inner: dims[0], d_state: f.integerOf(["ssm_state_size", "mamba_d_state"]),
      n_groups: dims[1] };
    return out;
  }

  function mamba2(f, n) {
    var dims = mamba2Heads(f, "num_heads", "head_dim", ["n_groups"]);
    if (f.given("expand") && f.integer("expand") * f.integer("hidden_size") !== dims[0]) {
      throw valueError(f.name("expand") + ": expected expand · hidden_size = num_heads · " +
        "head_dim = " + dims[0] + ", got " + f.integer("expand") + " · " +
        f.integer("hidden_size"));
    }
    return {
      layer_pattern: repeat("mamba2", n),
      n_heads: f.integer("num_heads"),
      head_dim: f.integer("head_dim"),
      conv_size: f.integer("conv_kernel"),
      ssm: { d_inner: dims[0], d_state: f.integer("state_size"), n_groups: dims[1] },
      mlp_hidden: f.integer("intermediate_size", 1n, dims[0]),
    };
  }

  function layers(f, n) {
    var kind = f.modelType;
    if (kind === "llama4_text") {
      var dense = f.integer("intermediate_size_mlp");
      return Object.assign(localGlobal(f, n, kind), attention(f), { mlp_hidden: dense });
    }
    if (kind === null || ATTENTION_TYPES.indexOf(kind) >= 0) {
      return Object.assign(localGlobal(f, n, kind), attention(f));
    }
    if (kind === "deepseek_v2" || kind === "deepseek_v3") {
      return { layer_pattern: repeat("mla", n), n_heads: f.integer("num_attention_heads"),
        head_dim: f.integer("qk_nope_head_dim"), mla: mla(f) };
    }
    var readers = { kimi_linear: kimi, qwen3_next: qwen3Next, minimax: minimax,
      minimax_text_01: minimax, minimax_m1: minimax, jamba: jamba, nemotron_h: nemotronH,
      mamba2: mamba2 };
    return readers[kind](f, n);
  }

  function experts(f) {
    var counts = ["n_routed_experts", "num_experts", "num_local_experts"];
    var perTokens = ["num_experts_per_tok", "num_experts_per_token"];
    if (!counts.some(function (k) { return f.given(k); })) return [null, null];
    var e = f.integerOf(counts), k = f.integerOf(perTokens);
    if (k > e) {
      throw valueError(perTokens.filter(function (x) { return f.given(x); })
        .map(function (x) { return f.name(x); }).join(" or ") + ": expected at most the " +
        "experts (" + counts.filter(function (x) { return f.given(x); }).join(" or ") +
        " = " + e + "), got " + k);
    }
    return [e, k];
  }

  function textFields(config) {
    var top = new Fields(config, "config");
    var kind = top.value("model_type", null);
    if (kind !== null && (typeof kind !== "string" || MODEL_TYPES.indexOf(kind) < 0)) {
      throw valueError("config['model_type']: model_type " + repr(kind) + " is not one the " +
        "calculator reads; expected one of " + MODEL_TYPES.join(", "));
    }
    if (!has(NESTED, kind)) return new Fields(config, "config", kind);
    var text = top.sub("text_config"), inner = NESTED[kind];
    if (text.value("model_type", inner) !== inner) {
      throw valueError(text.name("model_type") + ": expected " + strRepr(inner) + ", got " +
        repr(text.value("model_type")));
    }
    return new Fields(text.config, text.where, inner);
  }

  /** The architecture a config.json describes: attnlab.configs.architecture_from_config
   * (with the parameter count given, so the weights are not counted). */
  function readConfig(config) {
    var f = textFields(config);
    var n = f.integer("num_hidden_layers");
    if (n > MAX_LAYERS) {
      throw valueError(f.name("num_hidden_layers") + ": the calculator on this page reads at " +
        "most " + MAX_LAYERS + " layers, got " + n);
    }
    n = Number(n);
    var arch = layers(f, n);
    if (arch.layer_pattern.length !== n) {
      throw valueError("config: the " + (f.modelType === "nemotron_h" ?
        "hybrid_override_pattern" : "layer pattern") + " gives " + arch.layer_pattern.length +
        " layers, num_hidden_layers says " + n);
    }
    var ek = experts(f);
    var top = new Fields(config, "config");
    var name = top.given("_name_or_path") && top.string("_name_or_path");
    arch.name = name || (f.modelType === null ? "None" : f.modelType);
    arch.model_type = f.modelType;
    f.integer("vocab_size");
    f.integer("hidden_size");
    if (!arch.mlp_hidden) f.integer("intermediate_size");
    f.flag("tie_word_embeddings", false);
    arch.n_experts = ek[0];
    arch.experts_per_token = ek[1];
    if (arch.n_kv_heads === undefined) arch.n_kv_heads = arch.n_heads;
    if (arch.conv_size === undefined) arch.conv_size = 4n;
    return arch;
  }

  // ------------------------------------------------------------------ numbers and bytes
  function minInt(a, b) { return a < b ? a : b; }
  function recurrentHeads(a) {
    return a.recurrent || { n_key_heads: a.n_heads, key_dim: a.head_dim,
      n_value_heads: a.n_heads, value_dim: a.head_dim };
  }
  function attnNumbers(a, t) { return [2n * a.n_kv_heads * a.head_dim * t, 0n, 0n]; }
  function recurrentNumbers(a) {
    var r = recurrentHeads(a), w = a.conv_size;
    return [0n, r.n_value_heads * r.key_dim * r.value_dim,
      (w - 1n) * (2n * r.n_key_heads * r.key_dim + r.n_value_heads * r.value_dim)];
  }
  // attnlab.kinds.KINDS: numbers [cache, state, conv] of one layer for one sequence of t tokens
  var KINDS = {
    attn: { label: "softmax attention", grows: true, numbers: attnNumbers },
    mla: { label: "MLA", grows: true, numbers: function (a, t) {
      return [(a.mla.kv_lora_rank + a.mla.qk_rope_head_dim) * t, 0n, 0n]; } },
    swa: { label: "sliding-window attention", grows: true,
      window: function (a) { return a.sliding_window; },
      numbers: function (a, t) { return attnNumbers(a, minInt(t, a.sliding_window)); } },
    chunked: { label: "chunked attention", grows: true,
      window: function (a) { return a.attention_chunk_size; },
      numbers: function (a, t) { return attnNumbers(a, minInt(t, a.attention_chunk_size)); } },
    kda: { label: "KDA", numbers: recurrentNumbers },
    gdn: { label: "Gated DeltaNet", numbers: recurrentNumbers },
    deltanet: { label: "DeltaNet", numbers: recurrentNumbers },
    gla: { label: "GLA", numbers: recurrentNumbers },
    linear: { label: "linear attention", numbers: function (a) {
      var r = recurrentHeads(a), n = recurrentNumbers(a);
      return [0n, n[1] + r.n_key_heads * r.key_dim, n[2]]; } },
    lightning: { label: "lightning attention", numbers: function (a) {
      return [0n, recurrentNumbers(a)[1], 0n]; } },
    mamba: { label: "Mamba", numbers: function (a) {
      var s = a.ssm;
      return [0n, s.d_inner * s.d_state, (a.conv_size - 1n) * s.d_inner]; } },
    mamba2: { label: "Mamba-2", numbers: function (a) {
      var s = a.ssm;
      return [0n, s.d_inner * s.d_state,
        (a.conv_size - 1n) * (s.d_inner + 2n * s.n_groups * s.d_state)]; } },
    mlp: { label: "MLP only", numbers: function () { return [0n, 0n, 0n]; } },
  };

  var BITS = { fp64: 64n, fp32: 32n, bf16: 16n, fp16: 16n, fp8: 8n, int4: 4n, fp4: 4n };
  var MODEL_DTYPE = "bf16"; // attnlab.serving.MODEL_DTYPE
  var ENGINE_STATE_DTYPES = { kda: "fp32" }; // attnlab.serving.ENGINE_STATE_DTYPES

  function tensorBytes(numbers, dtype) { return (numbers * BITS[dtype] + 7n) / 8n; }
  function checkDtype(name, dtype, auto) {
    if (!(has(BITS, dtype) || (auto && dtype === "auto"))) {
      throw valueError(name + ": expected one of " + Object.keys(BITS).join(", ") +
        (auto ? ", auto" : "") + ", got " + repr(dtype));
    }
  }
  function kindsOf(arch) { return Array.from(new Set(arch.layer_pattern)); }

  /** Bytes one sequence of `context` tokens keeps, by kind and in all:
   * attnlab.serving.sequence_bytes(arch, context, cache_dtype=..., state_dtype=...). */
  function sequenceBytes(arch, context, cacheDtype, stateDtype) {
    context = BigInt(context);
    checkDtype("cache dtype", cacheDtype, false);
    checkDtype("state dtype", stateDtype, true);
    var conv = stateDtype === "auto" ? MODEL_DTYPE : cacheDtype;
    var byKind = {}, total = { cache: 0n, state: 0n, conv: 0n };
    kindsOf(arch).forEach(function (kind) {
      var n = KINDS[kind].numbers(arch, context);
      var state = stateDtype === "auto" ?
        (ENGINE_STATE_DTYPES[kind] || MODEL_DTYPE) : stateDtype;
      byKind[kind] = { layers: 0, cache: tensorBytes(n[0], cacheDtype),
        state: tensorBytes(n[1], state), conv: tensorBytes(n[2], conv), stateDtype: state };
    });
    var kinds = kindsOf(arch).map(function (kind) {
      var k = byKind[kind], count = 0;
      arch.layer_pattern.forEach(function (x) { if (x === kind) count++; });
      var c = BigInt(count);
      var row = { kind: kind, label: KINDS[kind].label, layers: count, cache: c * k.cache,
        state: c * k.state, conv: c * k.conv, stateDtype: k.stateDtype };
      total.cache += row.cache; total.state += row.state; total.conv += row.conv;
      return row;
    });
    total.total = total.cache + total.state + total.conv;
    return { kinds: kinds, cache: total.cache, state: total.state, conv: total.conv,
      total: total.total, convDtype: conv };
  }

  /** The context after which nothing more is kept: null if some cache grows with every token,
   * else the largest window (0 for states only): attnlab.memory.context_limit. */
  function contextLimit(arch) {
    var limits = [];
    var kinds = kindsOf(arch);
    for (var j = 0; j < kinds.length; j++) {
      var k = KINDS[kinds[j]];
      if (k.grows && !k.window) return null;
      limits.push(k.grows ? k.window(arch) : 0n);
    }
    return limits.reduce(function (a, b) { return a > b ? a : b; });
  }

  /** The longest context one sequence can reach in `memory` bytes (0 if its fixed states do
   * not fit, -1 for no cache limit): attnlab.serving.largest_context at batch 1 with the
   * weights' bytes added to the memory. */
  function largestContext(arch, memory, cacheDtype, stateDtype) {
    memory = BigInt(memory);
    function fits(t) { return sequenceBytes(arch, t, cacheDtype, stateDtype).total <= memory; }
    if (!fits(0n)) return 0n;
    var limit = contextLimit(arch);
    if (limit !== null && fits(limit)) return -1n;
    var lo = 0n, hi = 1n;
    while (fits(hi)) { lo = hi; hi = hi * 2n; }
    while (hi - lo > 1n) {
      var mid = (lo + hi) / 2n;
      if (fits(mid)) lo = mid; else hi = mid;
    }
    return lo;
  }

  // ------------------------------------------------------------------ formatting
  var DECIMAL = ["B", "kB", "MB", "GB", "TB", "PB"];
  var BINARY = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  function oneDecimal(n, d) { // Python's f"{n / d:.1f}": the double n / d, ties to even
    var x = Number(n) / Number(d);
    if ((x * 4) % 2 === 1) { // x = k + 0.25 or k + 0.75 exactly: the only ties a double has
      var floor = Math.floor(x * 10);
      return ((floor % 2 ? floor + 1 : floor) / 10).toFixed(1);
    }
    return x.toFixed(1); // the exact value of the double, rounded: no tie left
  }
  /** attnlab.memory.format_bytes: "704.6 MB (672.0 MiB)"; below 1000, "512 B". */
  function formatBytes(n) {
    n = BigInt(n);
    var order = 0;
    while (order + 1 < DECIMAL.length && n >= 1000n ** BigInt(order + 1)) order++;
    if (!order) return n + " B";
    return oneDecimal(n, 1000n ** BigInt(order)) + " " + DECIMAL[order] + " (" +
      oneDecimal(n, 1024n ** BigInt(order)) + " " + BINARY[order] + ")";
  }
  function grouped(n) { return BigInt(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function layout(arch) {
    return kindsOf(arch).filter(function (k) { return k !== "mlp"; }).map(function (k) {
      return arch.layer_pattern.filter(function (x) { return x === k; }).length + " " + k;
    }).join(" + ");
  }

  /** Everything the page shows, as plain data (byte counts as decimal strings): what the parity
   * test compares with the package. */
  function compute(text, options) {
    try {
      var arch = readConfig(parseJSON(text));
      var seq = sequenceBytes(arch, options.context, options.cacheDtype, options.stateDtype);
      var limit = contextLimit(arch);
      var out = {
        ok: true, name: arch.name, modelType: arch.model_type, layers: arch.layer_pattern.length,
        layout: layout(arch),
        kinds: seq.kinds.map(function (k) {
          return { kind: k.kind, label: k.label, layers: k.layers, cache: String(k.cache),
            state: String(k.state), conv: String(k.conv), stateDtype: k.stateDtype };
        }),
        cache: String(seq.cache), state: String(seq.state), conv: String(seq.conv),
        total: String(seq.total), convDtype: seq.convDtype,
        perToken: String(sequenceBytes(arch, 1, options.cacheDtype, "auto").cache),
        contextLimit: limit === null ? null : String(limit),
      };
      if (options.memory !== undefined && options.memory !== null) {
        out.largestContext = String(largestContext(arch, options.memory, options.cacheDtype,
          options.stateDtype));
      }
      return out;
    } catch (error) {
      if (!error.pyType) throw error;
      return { ok: false, error: error.pyType, message: error.message };
    }
  }

  // ------------------------------------------------------------------ the page
  // The result's words in the page's language: English, or Chinese on the Chinese edition
  // (<html lang="zh-CN">). A refusal's own message stays the package's, in English.
  var ZH = {
    "{n} bytes": "{n} 字节",
    "{n} layer": "{n} 层",
    "{n} layers": "{n} 层",
    "Paste a config.json above or choose a preset.": "在上方粘贴一个 config.json，或选一个预设。",
    "Context: expected a whole number of tokens >= 0, got {got}":
      "上下文：应为不小于 0 的整数（Token 数），收到的是 {got}",
    "Refused ({error}): {message}": "已拒绝（{error}）：{message}",
    "{name}: {layers} layers, {layout}.": "{name}：{layers} 层，{layout}。",
    "Kept for one sequence of {tokens} tokens, by layer kind":
      "一条 {tokens} 个 Token 的序列所保存的内容，按层的种类列出",
    "Kind": "种类",
    "Cache (grows)": "缓存（增长）",
    "State": "状态",
    "Conv inputs": "卷积输入",
    "Total": "合计",
    "all": "全部",
    "Each new token adds {bytes} of cache ({exact} B).":
      "每个新 Token 增加 {bytes} 缓存（{exact} 字节）。",
    "{kind} states in {dtype}": "{kind} 状态以 {dtype} 保存",
    "convolution inputs in {dtype}": "卷积输入以 {dtype} 保存",
    ", ": "，",
    "Stored: {list}.": "保存方式：{list}。",
    "Some cache grows with every token: no context at which it stops.":
      "有缓存随每个 Token 增长：不存在让它停止增长的上下文长度。",
    "Nothing grows with the context: only fixed states.":
      "没有随上下文增长的部分：只有固定大小的状态。",
    "Nothing grows after {tokens} tokens (the longest window).":
      "{tokens} 个 Token 之后不再增长（最长的窗口）。",
    "In {memory}: no cache limit (every cache stops growing before the memory is full).":
      "在 {memory} 内：没有上限（内存占满之前，所有缓存都已停止增长）。",
    "In {memory}: not even the fixed states fit.": "在 {memory} 内：连固定大小的状态都放不下。",
    "In {memory}: at most {tokens} tokens.": "在 {memory} 内：最多 {tokens} 个 Token。",
    "Memory: expected a number such as 8 or 0.5.": "内存：应为一个数，例如 8 或 0.5。",
    "{n} × {kind}": "{n} 层 {kind}",
    // the kinds' labels (KINDS above); the others are names
    "softmax attention": "softmax 注意力",
    "sliding-window attention": "滑动窗口注意力",
    "chunked attention": "分块注意力",
    "linear attention": "线性注意力",
    "lightning attention": "闪电注意力（lightning attention）",
    "MLP only": "仅 MLP"
  };
  function say(text, values) {
    var lang = (root.document && root.document.documentElement.lang) || "";
    var out = lang.indexOf("zh") === 0 && ZH[text] !== undefined ? ZH[text] : text;
    Object.keys(values || {}).forEach(function (k) { out = out.split("{" + k + "}").join(values[k]); });
    return out;
  }
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function bytesCell(tag, n) { // "704.6 MB" over "(672.0 MiB)", the exact count in data-bytes
    var cell = el(tag, { "data-bytes": String(n), title: say("{n} bytes", { n: grouped(n) }) });
    var parts = /^(.*?)( \(.*\))?$/.exec(formatBytes(n));
    cell.appendChild(el("span", { class: "calc-unit" }, parts[1]));
    if (parts[2]) cell.appendChild(el("span", { class: "calc-unit calc-binary" }, parts[2].trim()));
    return cell;
  }
  function kindCell(label, layers) { // "Mamba" over "28 layers"
    var cell = el("th", { scope: "row" });
    cell.appendChild(el("span", { class: "calc-kind" }, label));
    cell.appendChild(el("span", { class: "calc-count" },
      say(layers === 1 ? "{n} layer" : "{n} layers", { n: layers })));
    return cell;
  }
  var UNITS = { GB: 1000n ** 3n, GiB: 1024n ** 3n, MB: 1000n ** 2n, MiB: 1024n ** 2n };
  function memoryBytes(value, unit) {
    var m = /^\s*([0-9]+)(?:\.([0-9]*))?\s*$/.exec(value);
    if (!m) return null;
    var frac = (m[2] || "").slice(0, 9).padEnd(9, "0");
    return (BigInt(m[1]) * 1000000000n + BigInt(frac)) * UNITS[unit] / 1000000000n;
  }

  function render(form) {
    var q = function (id) { return form.querySelector("#" + id); };
    var out = q("calc-result");
    out.textContent = "";
    var text = q("calc-config").value;
    if (!text.trim()) {
      out.appendChild(el("p", {}, say("Paste a config.json above or choose a preset.")));
      return;
    }
    var contextText = q("calc-context").value.trim();
    if (!/^[0-9]+$/.test(contextText)) {
      out.appendChild(el("p", { class: "calc-error", role: "alert" },
        say("Context: expected a whole number of tokens >= 0, got {got}",
          { got: repr(contextText) })));
      return;
    }
    var memory = memoryBytes(q("calc-memory").value, q("calc-memory-unit").value);
    var r = compute(text, { context: BigInt(contextText), cacheDtype: q("calc-dtype").value,
      stateDtype: q("calc-state").value, memory: memory });
    if (!r.ok) {
      out.appendChild(el("p", { class: "calc-error", role: "alert" },
        say("Refused ({error}): {message}", { error: r.error, message: r.message })));
      return;
    }
    out.appendChild(el("p", { class: "calc-summary" }, say("{name}: {layers} layers, {layout}.", {
      name: r.name + (r.name === String(r.modelType) ? "" : " (" + r.modelType + ")"),
      layers: r.layers, layout: r.kinds.filter(function (k) { return k.kind !== "mlp"; })
        .map(function (k) { return say("{n} × {kind}", { n: k.layers, kind: say(k.label) }); })
        .join(" + ") })));
    var wrap = el("div", { class: "calc-table-wrap" });
    var table = el("table", { class: "calc-table" });
    table.appendChild(el("caption", {}, say("Kept for one sequence of {tokens} tokens, by layer kind",
      { tokens: grouped(contextText) })));
    var head = el("tr");
    ["Kind", "Cache (grows)", "State", "Conv inputs", "Total"].forEach(function (h) {
      head.appendChild(el("th", { scope: "col" }, say(h)));
    });
    table.appendChild(el("thead")).appendChild(head);
    var body = table.appendChild(el("tbody"));
    r.kinds.forEach(function (k) {
      var row = el("tr", { "data-kind": k.kind });
      row.appendChild(kindCell(say(k.label), k.layers));
      [k.cache, k.state, k.conv].forEach(function (n) { row.appendChild(bytesCell("td", n)); });
      row.appendChild(bytesCell("td", BigInt(k.cache) + BigInt(k.state) + BigInt(k.conv)));
      body.appendChild(row);
    });
    var foot = el("tr", { class: "calc-total" });
    foot.appendChild(kindCell(say("all"), r.layers));
    [r.cache, r.state, r.conv, r.total].forEach(function (n) { foot.appendChild(bytesCell("td", n)); });
    table.appendChild(el("tfoot")).appendChild(foot);
    wrap.appendChild(table);
    out.appendChild(wrap);
    var notes = el("ul", { class: "calc-notes" });
    notes.appendChild(el("li", {}, say("Each new token adds {bytes} of cache ({exact} B).",
      { bytes: formatBytes(r.perToken), exact: grouped(r.perToken) })));
    var stored = r.kinds.filter(function (k) { return k.state !== "0"; }).map(function (k) {
      return say("{kind} states in {dtype}", { kind: say(k.label), dtype: k.stateDtype });
    });
    if (r.conv !== "0") stored.push(say("convolution inputs in {dtype}", { dtype: r.convDtype }));
    if (stored.length) {
      notes.appendChild(el("li", {}, say("Stored: {list}.", { list: stored.join(say(", ")) })));
    }
    notes.appendChild(el("li", {}, r.contextLimit === null ?
      say("Some cache grows with every token: no context at which it stops.") :
      r.contextLimit === "0" ? say("Nothing grows with the context: only fixed states.") :
      say("Nothing grows after {tokens} tokens (the longest window).",
        { tokens: grouped(r.contextLimit) })));
    if (r.largestContext !== undefined) {
      var memoryText = q("calc-memory").value.trim() + " " + q("calc-memory-unit").value;
      notes.appendChild(el("li", { class: "calc-longest" }, r.largestContext === "-1" ?
        say("In {memory}: no cache limit (every cache stops growing before the memory is full).",
          { memory: memoryText }) : r.largestContext === "0" ?
        say("In {memory}: not even the fixed states fit.", { memory: memoryText }) :
        say("In {memory}: at most {tokens} tokens.",
          { memory: memoryText, tokens: grouped(r.largestContext) })));
    } else {
      notes.appendChild(el("li", { class: "calc-error" },
        say("Memory: expected a number such as 8 or 0.5.")));
    }
    out.appendChild(notes);
  }

  function setUp(form) {
    var types = form.querySelector("#calc-model-types");
    if (types) types.textContent = MODEL_TYPES.join(", ");
    var presets = root.ATTNLAB_CALCULATOR_PRESETS || [];
    var box = form.querySelector("#calc-presets");
    presets.forEach(function (p) {
      var b = el("button", { type: "button", class: "calc-preset", "data-preset": p.name,
        title: p.source }, p.name);
      b.setAttribute("aria-pressed", "false");
      b.addEventListener("click", function () {
        box.querySelectorAll(".calc-preset").forEach(function (other) {
          other.setAttribute("aria-pressed", String(other === b));
        });
        form.querySelector("#calc-config").value = p.text;
        render(form);
      });
      box.appendChild(b);
    });
    form.addEventListener("submit", function (e) { e.preventDefault(); render(form); });
    form.addEventListener("change", function () { render(form); });
    form.querySelector("#calc-config").addEventListener("input", function () {
      box.querySelectorAll(".calc-preset").forEach(function (b) {
        b.setAttribute("aria-pressed", "false");
      });
      render(form);
    });
    render(form);
  }

  root.attnlabCalculator = { parseJSON: parseJSON, readConfig: readConfig,
    sequenceBytes: sequenceBytes, contextLimit: contextLimit, largestContext: largestContext,
    formatBytes: formatBytes, compute: compute, MODEL_TYPES: MODEL_TYPES };

  if (typeof document !== "undefined") {
    var start = function () {
      var form = document.getElementById("attnlab-calculator");
      if (form) setUp(form);
    };
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
    else start();
  }
})(typeof window !== "undefined" ? window : globalThis);
