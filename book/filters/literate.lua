--[[
literate.lua: turn a chapter's literate blocks into ordinary pandoc blocks.

  ```{include=PATH fn=NAME stage=NN}      code from a stage of the kernel tree
  ```{src=PATH fn=NAME}                   code from this repository (stages/, vm/, tools/...)
  ```{patch=NN/NNNN file=PATH hunk=N}     a patch (or part of it) from kernel-patches/
                                           (any of these: solution=NAME marks the listing
                                           as giving exercise NAME away)
  ```{results=NN-slug/FILE}               output of a test or bench run (build/results)
  ```dot                                   a Graphviz diagram

It also checks and rewrites the chapter's links and images (see book/README.md).
Code extraction is done by book/literate.py, in one batch per chapter.

Environment (set by book/build.py): BOOK_ROOT (repository), BOOK_OUT (output
directory, whose figures/, results/ and img/ exist), BOOK_RESULTS, BOOK_PYTHON,
BOOK_CHAPTERS and BOOK_PLANNED (space-separated chapter slugs), KERNEL_TREE.
A chapter with any failing block fails the build with one message per block.
]]

local ROOT = os.getenv("BOOK_ROOT") or "."
local OUT = os.getenv("BOOK_OUT") or "build/book"
local RESULTS = os.getenv("BOOK_RESULTS") or (ROOT .. "/build/results")
local PYTHON = os.getenv("BOOK_PYTHON") or "python3"
local HELPER = ROOT .. "/book/literate.py"
if os.getenv("BOOK_HELPER") then HELPER = os.getenv("BOOK_HELPER") end

local chapter_path = PANDOC_STATE.input_files[1] or "chapter.md"
local chapter_file = pandoc.path.filename(chapter_path)
local chapter_slug = chapter_file:gsub("%.md$", "")
local chapter_nn = chapter_slug:match("^(%d%d)%-") or ""
local chapter_name = "chapters/" .. chapter_file

local errors = {}
local function fail(msg) table.insert(errors, chapter_name .. ": " .. msg) end

local function set_of(words)
  local s = {}
  for w in (words or ""):gmatch("%S+") do s[w] = true end
  return s
end
local written = set_of(os.getenv("BOOK_CHAPTERS"))
local planned = set_of(os.getenv("BOOK_PLANNED"))

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local data = f:read("a")
  f:close()
  return data
end

local function write_file(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

-- SVG as EPUB 3 allows it: no DOCTYPE. Graphviz writes one with external
-- identifiers (epubcheck OPF-073), and readers that resolve the SVG 1.1
-- DTD find external entities in it (HTM-003). An internal subset's own
-- general entities, the only thing a DOCTYPE could add, are expanded.
local function clean_svg(data)
  local s, e = data:find("<!DOCTYPE", 1, true)
  if not s then return data end
  local close = data:find("[%[>]", e + 1)
  local subset = ""
  if close and data:sub(close, close) == "[" then
    local sub_end = data:find("]%s*>", close + 1)
    if not sub_end then return data end
    subset = data:sub(close + 1, sub_end - 1)
    close = data:find(">", sub_end, true)
  end
  if not close then return data end
  local rest = data:sub(close + 1)
  for name, value in subset:gmatch('<!ENTITY%s+([%w_.:-]+)%s+"([^"]*)"%s*>') do
    rest = rest:gsub("&" .. name:gsub("%p", "%%%0") .. ";", (value:gsub("%%", "%%%%")))
  end
  for name, value in subset:gmatch("<!ENTITY%s+([%w_.:-]+)%s+'([^']*)'%s*>") do
    rest = rest:gsub("&" .. name:gsub("%p", "%%%0") .. ";", (value:gsub("%%", "%%%%")))
  end
  return data:sub(1, s - 1) .. rest:gsub("^%s*\n", "\n", 1)
end

local function is_svg(path) return path:lower():match("%.svg$") ~= nil end

local function md_inlines(text)
  local doc = pandoc.read(text, "markdown")
  if #doc.blocks == 0 then return pandoc.List() end
  return doc.blocks[1].content
end

local function flat(path) return (path:gsub("[/\\]", "--")) end

-- A path relative to chapters/, as a path relative to the repository
-- (nil if it climbs out of it). pandoc.path.normalize keeps "..".
local function repo_relative(path)
  local parts = {"chapters"}
  for part in path:gmatch("[^/]+") do
    if part == ".." then
      if #parts == 0 then return nil end
      table.remove(parts)
    elseif part ~= "." then
      table.insert(parts, part)
    end
  end
  return table.concat(parts, "/")
end

local function is_inclusion(cb)
  return cb.attributes["include"] ~= nil or cb.attributes["patch"] ~= nil
      or cb.attributes["src"] ~= nil
end

-------------------------------------------------------------------------------
-- Code and patch inclusions: one batch request to book/literate.py

local function request_line(cb)
  local fields = {"chapter=" .. chapter_name}
  if chapter_nn ~= "" then table.insert(fields, "default-stage=" .. chapter_nn) end
  for k, v in pairs(cb.attributes) do
    table.insert(fields, k .. "=" .. v:gsub("[\t\n]", " "))
  end
  table.sort(fields)
  return table.concat(fields, "\t")
end

local function run_helper(lines)
  if #lines == 0 then return {} end
  local ok, out = pcall(pandoc.pipe, PYTHON, {HELPER, "serve"},
                        table.concat(lines, "\n") .. "\n")
  if not ok then
    error(chapter_name .. ": book/literate.py failed: " .. tostring(out))
  end
  local answers, pos = {}, 1
  while pos <= #out do
    local nl = out:find("\n", pos, true)
    local head = out:sub(pos, nl - 1)
    local status, nbytes, rest = head:match("^(%u+) (%d+)(.*)$")
    nbytes = tonumber(nbytes)
    local body = out:sub(nl + 1, nl + nbytes)
    pos = nl + nbytes + 1
    if status == "OK" then
      local first, lang, solutions, caption = rest:match("^ (%d+) (%S+) (%S+)\t(.*)$")
      table.insert(answers, {text = body, first = tonumber(first), lang = lang,
                             solutions = solutions, caption = caption})
    elseif status == "STUB" then
      -- the listing before, as the exercise branch has it
      local ans = answers[#answers]
      if nbytes > 0 then
        ans.stub = {text = body, first = tonumber(rest:match("^ (%d+)"))}
      end
    else
      table.insert(answers, {error = body})
    end
  end
  return answers
end

local function listing(cb, ans)
  local function code_block(text, first)
    local classes = {ans.lang}
    for _, c in ipairs(cb.classes) do
      if c ~= ans.lang then table.insert(classes, c) end
    end
    if cb.classes[1] then classes[1] = cb.classes[1] end
    local attrs = {}
    if first > 0 and cb.attributes["numbers"] ~= "no" then
      table.insert(classes, "numberLines")
      attrs.startFrom = tostring(first)
    end
    return pandoc.CodeBlock(text, pandoc.Attr("", classes, attrs))
  end
  local code = code_block(ans.text, ans.first)
  local caption = md_inlines(ans.caption)
  if cb.attributes["caption"] then
    local own = md_inlines(cb.attributes["caption"])
    own:insert(pandoc.Str(" —"))
    own:insert(pandoc.Space())
    caption = own .. caption
  end
  local cap = pandoc.Div({pandoc.Plain(caption)}, pandoc.Attr("", {"listing-caption"}))
  -- A listing that shows an exercise's answer: book/build.py folds it away
  -- (a disclosure on the web, the Solutions appendix in the EPUB and PDF).
  -- Where the exercise branch has the same code hollowed, that is shown
  -- first, and the solution after it.
  if ans.solutions and ans.solutions ~= "-" then
    if ans.stub then
      local stub_cap = caption:clone()
      stub_cap:insert(pandoc.Str(" · as on the exercise branch"))
      local shown = pandoc.Div(
        {pandoc.Div({pandoc.Plain(stub_cap)}, pandoc.Attr("", {"listing-caption"})),
         code_block(ans.stub.text, ans.stub.first)},
        pandoc.Attr(cb.identifier, {"listing", "exercise-stub"}))
      return {shown, pandoc.Div({cap, code}, pandoc.Attr("", {"listing", "solution"},
                                                         {["data-exercises"] = ans.solutions}))}
    end
    return pandoc.Div({cap, code}, pandoc.Attr(cb.identifier, {"listing", "solution"},
                                               {["data-exercises"] = ans.solutions}))
  end
  return pandoc.Div({cap, code}, pandoc.Attr(cb.identifier, {"listing"}))
end

-------------------------------------------------------------------------------
-- Graphviz

local function render_dot(source, caption, ident)
  local svg_ok, svg = pcall(pandoc.pipe, "dot",
    {"-Tsvg", "-Gfontname=DejaVu Sans", "-Nfontname=DejaVu Sans",
     "-Efontname=DejaVu Sans", "-Gbgcolor=transparent"}, source)
  if not svg_ok then
    return nil, "Graphviz (dot) could not render a diagram: " .. tostring(svg)
  end
  local name = "figures/dot-" .. pandoc.utils.sha1(source):sub(1, 12) .. ".svg"
  write_file(OUT .. "/" .. name, clean_svg(svg))
  local alt = caption and md_inlines(caption) or {pandoc.Str("Diagram")}
  -- an image alone in a paragraph with a "fig:" title is a figure with a caption
  local img = pandoc.Image(alt, name, caption and "fig:" or "")
  return pandoc.Div({pandoc.Para({img})}, pandoc.Attr(ident or "", {"diagram"}))
end

-------------------------------------------------------------------------------
-- Results of test and bench runs

local function default_command(rel)
  local nn = rel:match("^(%d%d)%-")
  if nn then return "make test STAGE=" .. nn end
  return "make test"
end

local function note_missing(rel, cmd)
  local f = io.open(OUT .. "/.work/missing.tsv", "a")
  if f then
    f:write(chapter_name .. "\t" .. rel .. "\t" .. cmd .. "\n")
    f:close()
  end
end

local function select_lines(text, cb)
  local lines = {}
  for line in (text:gsub("\n$", "") .. "\n"):gmatch("(.-)\n") do table.insert(lines, line) end
  local a, b = 1, #lines
  if cb.attributes["lines"] then
    local x, dash, y = cb.attributes["lines"]:match("^(%d+)(%-?)(%d*)$")
    if not x then return nil, "lines=" .. cb.attributes["lines"] .. ": expected A-B, A- or A" end
    a = tonumber(x)
    b = (y ~= "" and tonumber(y)) or (dash == "-" and #lines) or a
  elseif cb.attributes["tail"] then
    local n = tonumber(cb.attributes["tail"])
    if not n then return nil, "tail=" .. cb.attributes["tail"] .. ": expected a number" end
    a = math.max(1, #lines - n + 1)
  elseif cb.attributes["head"] then
    local n = tonumber(cb.attributes["head"])
    if not n then return nil, "head=" .. cb.attributes["head"] .. ": expected a number" end
    b = math.min(#lines, n)
  end
  local kept = {}
  for i = a, math.min(b, #lines) do table.insert(kept, lines[i]) end
  return table.concat(kept, "\n")
end

local function results_block(cb)
  local rel = cb.attributes["results"]
  local path = RESULTS .. "/" .. rel
  local cmd = cb.attributes["run"] or default_command(rel)
  local caption = cb.attributes["caption"]
  local ext = (rel:match("%.([%w]+)$") or ""):lower()
  local data = read_file(path)
  if data == nil then
    note_missing(rel, cmd)
    local note = pandoc.Para({
      pandoc.Strong({pandoc.Str("No results yet.")}), pandoc.Space(),
      pandoc.Str("This place shows"), pandoc.Space(), pandoc.Code("build/results/" .. rel),
      pandoc.Str(","), pandoc.Space(), pandoc.Str("which"), pandoc.Space(), pandoc.Code(cmd),
      pandoc.Space(), pandoc.Str("writes."), pandoc.Space(), pandoc.Str("Run"), pandoc.Space(),
      pandoc.Str("it,"), pandoc.Space(), pandoc.Str("then"), pandoc.Space(),
      pandoc.Code("make book"), pandoc.Space(), pandoc.Str("again.")})
    return pandoc.Div({note}, pandoc.Attr(cb.identifier, {"results-missing"},
                                          {["data-results"] = rel}))
  end
  local cap_blocks = {}
  local origin = {pandoc.Str("Results:"), pandoc.Space(), pandoc.Code("build/results/" .. rel)}
  local part = (cb.attributes["lines"] and ("lines " .. cb.attributes["lines"]))
    or (cb.attributes["head"] and ("first " .. cb.attributes["head"] .. " lines"))
    or (cb.attributes["tail"] and ("last " .. cb.attributes["tail"] .. " lines"))
  if part then
    table.insert(origin, pandoc.Str(" · " .. part))
  end
  if caption then
    local own = md_inlines(caption)
    own:insert(pandoc.Str(" —"))
    own:insert(pandoc.Space())
    origin = own .. origin
  end
  cap_blocks = {pandoc.Div({pandoc.Plain(origin)}, pandoc.Attr("", {"listing-caption"}))}
  local body
  if ext == "svg" or ext == "png" or ext == "jpg" or ext == "jpeg" then
    local name = "results/" .. flat(rel)
    write_file(OUT .. "/" .. name, ext == "svg" and clean_svg(data) or data)
    body = {pandoc.Para({pandoc.Image(caption and md_inlines(caption) or {pandoc.Str(rel)}, name)})}
  elseif ext == "dot" then
    local fig, err = render_dot(data, caption, "")
    if not fig then return nil, err end
    body = {fig}
  elseif ext == "md" then
    body = pandoc.read(data, "markdown").blocks
  elseif ext == "csv" then
    body = pandoc.read(data, "csv").blocks
  else
    local text, err = select_lines(data, cb)
    if not text then return nil, err end
    local lang = cb.classes[1] or (ext == "json" and "json") or "output"
    if text:match("^%s*K?TAP version") then lang = "ktap" end
    body = {pandoc.CodeBlock(text, pandoc.Attr("", {lang}))}
  end
  local blocks = pandoc.List(cap_blocks)
  blocks:extend(body)
  return pandoc.Div(blocks, pandoc.Attr(cb.identifier, {"results"}, {["data-results"] = rel}))
end

-------------------------------------------------------------------------------
-- Links and images

local function local_target(target)
  return not (target:match("^%a[%w+.-]*:") or target:match("^#") or target:match("^//"))
end

local function rewrite_link(link)
  if not local_target(link.target) then return nil end
  local path, frag = link.target:match("^([^#]*)(#?.*)$")
  local slug = path:match("^%.?/?(%d%d%-[%w._-]+)%.md$")
  if slug then
    if written[slug] then
      link.target = slug .. ".html" .. frag
      return link
    elseif planned[slug] then
      return pandoc.Span(link.content, pandoc.Attr("", {"unwritten"}, {title = "not written yet"}))
    end
    fail("link to chapter " .. path .. ", which does not exist and is not planned in book/features.toml")
    return nil
  end
  local rel = repo_relative(path)
  if path ~= "" and rel and exists(ROOT .. "/" .. rel) then
    -- a file of the repository: readable on a forge, but not part of the book
    return pandoc.Span(link.content, pandoc.Attr("", {"repo-path"}, {title = rel}))
  end
  fail("broken link to " .. link.target)
  return nil
end

local function rewrite_image(img)
  if not local_target(img.src) or img.src:match("^figures/") or img.src:match("^results/") then
    return nil
  end
  local rel = repo_relative(img.src)
  local data = rel and read_file(ROOT .. "/" .. rel)
  if not data then
    fail("missing image " .. img.src)
    return nil
  end
  local name = "img/" .. flat(rel)
  write_file(OUT .. "/" .. name, is_svg(rel) and clean_svg(data) or data)
  img.src = name
  return img
end

-------------------------------------------------------------------------------

function Pandoc(doc)
  -- pass 1: all code inclusions of the chapter in one request
  local requests = {}
  doc:walk({CodeBlock = function(cb)
    if is_inclusion(cb) then table.insert(requests, request_line(cb)) end
  end})
  local answers = run_helper(requests)

  local h1 = 0
  local n = 0
  doc = doc:walk({
    CodeBlock = function(cb)
      if is_inclusion(cb) then
        n = n + 1
        local ans = answers[n]
        if ans == nil or ans.error then
          table.insert(errors, ans and ans.error or (chapter_name .. ": no answer for inclusion " .. n))
          return {}
        end
        return listing(cb, ans)
      elseif cb.attributes["results"] then
        local div, err = results_block(cb)
        if not div then fail("results " .. cb.attributes["results"] .. ": " .. err) return {} end
        return div
      elseif cb.classes[1] == "dot" or cb.classes[1] == "graphviz" then
        local div, err = render_dot(cb.text, cb.attributes["caption"], cb.identifier)
        if not div then fail(err) return {} end
        return div
      end
    end,
    Header = function(h)
      if h.level == 1 then
        h1 = h1 + 1
        h.classes:insert("chapter-title")
        if chapter_nn ~= "" and tonumber(chapter_nn) > 0 then  -- the introduction is no "Chapter 0"
          h.attributes["chapter"] = tostring(tonumber(chapter_nn))
        end
        return h
      end
    end,
    Link = rewrite_link,
    Image = rewrite_image,
    -- A fence whose attributes pandoc cannot parse (a quoted value that
    -- starts with a blank, say) is read as inline code with the braces in its text, and would be
    -- printed as it is.
    Code = function(code)
      local key = code.text:match("^{%s*(%a+)=")
      if key == "include" or key == "src" or key == "patch" or key == "results" then
        fail("pandoc could not read the attributes of this block, so it is not one: " .. code.text)
      end
    end,
  })
  if h1 ~= 1 then
    fail("a chapter has exactly one level-1 heading (its title, '# Title'); sections use '##' " ..
         "and below. Found " .. h1 .. ".")
  end
  if #errors > 0 then
    error("\n" .. table.concat(errors, "\n") .. "\n", 0)
  end
  doc.meta["chapter-slug"] = chapter_slug
  return doc
end
